#!/usr/bin/env bash
# Regenerates the CRDs, RBAC roles, DeepCopy methods, dist/install.yaml and the Helm
# chart's generated parts and fails if they differ from what was there before, so stale
# generated files never land.
# The regenerated files stay in place: review and commit them.
set -euo pipefail
cd "$(dirname "$0")/.."
generated=(config/crd/bases config/rbac/role.yaml config/rbac/webui/role.yaml config/rbac/gateway/role.yaml dist/install.yaml api/v1alpha1/zz_generated.deepcopy.go charts/sftpgate/crds charts/sftpgate/templates/generated charts/sftpgate/values.yaml)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
for path in "${generated[@]}"; do
  if [ -e "$path" ]; then
    mkdir -p "$before/$(dirname "$path")"
    cp -r "$path" "$before/$path"
  fi
done
make --no-print-directory -s manifests generate build-installer chart CONTROLLER_GEN="${CONTROLLER_GEN:?}"
stale=0
for path in "${generated[@]}"; do
  if ! diff -ruN "$before/$path" "$path"; then
    stale=1
  fi
done
if [ "$stale" = 1 ]; then
  echo "verify-generated: the generated files above were stale; they are regenerated now: review and commit them." >&2
  exit 1
fi
