#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that envtest runs, from the Go
# module proxy. setup-envtest downloads prebuilt archives from hosts that are
# not reachable from our machines and CI, so we compile the same programs from
# source instead, each inside a throw-away helper module.
#
# Usage: hack/control-plane.sh DIR
#   Builds DIR/kube-apiserver and DIR/etcd unless both already exist (the
#   directory name carries the versions, so a version bump builds afresh;
#   the Makefile keeps it under the user's cache directory, where every
#   clone of the project finds it).
# Versions come from the environment: K8S_VERSION (e.g. 1.37.0) and
# ETCD_VERSION (e.g. 3.6.16). Progress goes to stderr: the packages
# compiled out of those each program needs, and the time taken.
set -euo pipefail

dest=${1:?usage: hack/control-plane.sh DIR}
: "${K8S_VERSION:?set K8S_VERSION, e.g. 1.37.0}"
: "${ETCD_VERSION:?set ETCD_VERSION, e.g. 3.6.16}"

if [ -x "$dest/kube-apiserver" ] && [ -x "$dest/etcd" ]; then
  exit 0
fi

log() { echo "control-plane: $*" >&2; }

# quiet runs a command, showing what it printed only if it fails: go get
# names every module it adds.
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    echo "$out" >&2
    return 1
  fi
}

# build NAME OUT PKG [FLAGS...] compiles PKG into OUT in the current module,
# saying every tenth or so how many of its packages are compiled.
build() {
  local name=$1 out=$2 pkg=$3 total start=$SECONDS
  shift 3
  total=$(go list -deps "$pkg" | wc -l)
  log "$name: compiling $total packages"
  # go build -v names each package as it compiles it (those already in
  # the build cache are not named); anything else it says is an error.
  go build -v -trimpath "$@" -o "$out" "$pkg" 2>&1 | {
    local n=0 step=$(( (total + 9) / 10 )) line
    while IFS= read -r line; do
      case $line in
      *' '* | '#'*) echo "$line" >&2 ;;
      *)
        n=$((n + 1))
        if (( n % step == 0 )); then
          log "$name: $n of $total packages compiled ($((SECONDS - start))s)"
        fi
        ;;
      esac
    done
  } || { log "$name: the build failed"; return 1; }
  log "$name: built in $((SECONDS - start))s"
}
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
  (cd "$mod" && quiet go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION")
  local pkg=k8s.io/component-base/version
  (cd "$mod" && build "kube-apiserver v$K8S_VERSION" "$dest/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
    -ldflags="-s -w -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)")
}

build_etcd() {
  local mod="$work/etcd"
  mkdir -p "$mod"
  printf 'module sftpgate.dev/hack/etcd\n\ngo 1.26.0\n' >"$mod/go.mod"
  log "resolving etcd v$ETCD_VERSION"
  (cd "$mod" && quiet go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION")
  (cd "$mod" && build "etcd v$ETCD_VERSION" "$dest/etcd" go.etcd.io/etcd/server/v3 -ldflags="-s -w")
}

[ -x "$dest/etcd" ] || build_etcd
[ -x "$dest/kube-apiserver" ] || build_kube_apiserver
log "ready in $dest"
