#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that envtest runs, from the Go
# module proxy. setup-envtest downloads prebuilt archives from hosts that are
# not reachable from our machines and CI, so we compile the same programs from
# source instead, each inside a throw-away helper module.
#
# Usage: hack/control-plane.sh DIR
#   Builds DIR/kube-apiserver and DIR/etcd unless both already exist (the
#   directory name carries the versions, so a version bump builds afresh).
# Versions come from the environment: K8S_VERSION (e.g. 1.37.0) and
# ETCD_VERSION (e.g. 3.6.16). Progress goes to stderr; the first build takes
# several minutes on two cores.
set -euo pipefail

dest=${1:?usage: hack/control-plane.sh DIR}
: "${K8S_VERSION:?set K8S_VERSION, e.g. 1.37.0}"
: "${ETCD_VERSION:?set ETCD_VERSION, e.g. 3.6.16}"

if [ -x "$dest/kube-apiserver" ] && [ -x "$dest/etcd" ]; then
  exit 0
fi

log() { echo "control-plane: $*" >&2; }
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sftpgate-control-plane.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Staging modules (k8s.io/api, k8s.io/apiserver, ...) are published as
# v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
staging_version="v0.${K8S_VERSION#1.}"

build_kube_apiserver() {
  local mod="$work/kube-apiserver"
  mkdir -p "$mod"
  log "fetching k8s.io/kubernetes v$K8S_VERSION"
  local gomod
  gomod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  # k8s.io/kubernetes points every staging module at ./staging/src/...,
  # which a module download does not contain; use the published ones.
  {
    echo "module sftpgate.dev/hack/kube-apiserver"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$gomod"
    echo ")"
  } >"$mod/go.mod"
  log "resolving kube-apiserver's dependencies"
  (cd "$mod" && go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" >&2)
  log "building kube-apiserver v$K8S_VERSION (5 to 10 minutes the first time)"
  local pkg=k8s.io/component-base/version
  (cd "$mod" && go build -trimpath \
    -ldflags="-s -w -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)" \
    -o "$dest/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
}

build_etcd() {
  local mod="$work/etcd"
  mkdir -p "$mod"
  printf 'module sftpgate.dev/hack/etcd\n\ngo 1.26.0\n' >"$mod/go.mod"
  log "resolving etcd v$ETCD_VERSION"
  (cd "$mod" && go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2)
  log "building etcd v$ETCD_VERSION"
  (cd "$mod" && go build -trimpath -ldflags="-s -w" -o "$dest/etcd" go.etcd.io/etcd/server/v3)
}

[ -x "$dest/etcd" ] || build_etcd
[ -x "$dest/kube-apiserver" ] || build_kube_apiserver
log "ready in $dest"
