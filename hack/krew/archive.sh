#!/usr/bin/env bash
# Packs bin/sftpgate (make build) and LICENSE as the krew archive of this
# machine's platform, and writes a copy of hack/krew/sftpgate.yaml with
# that archive's SHA-256 in its place, both into bin/krew, so that krew
# installs the plugin from a checkout:
#   kubectl krew install --manifest=bin/krew/sftpgate.yaml --archive=bin/krew/sftpgate_<os>_<arch>.tar.gz
set -euo pipefail
cd "$(dirname "$0")/../.."
os=$(go env GOOS)
arch=$(go env GOARCH)
out=bin/krew
archive=$out/sftpgate_${os}_${arch}.tar.gz
mkdir -p "$out"
tar -czf "$archive" -C bin sftpgate -C .. LICENSE
if command -v sha256sum >/dev/null; then
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
else
  sum=$(shasum -a 256 "$archive" | cut -d' ' -f1) # macOS
fi
# The sha256 line after the platform's uri.
awk -v name="sftpgate_${os}_${arch}.tar.gz" -v sum="$sum" '
  index($0, name) { found = 1; print; next }
  found && /sha256:/ { done = sub(/"[0-9a-f]+"/, "\"" sum "\""); found = 0 }
  { print }
  END { if (!done) { print "no platform " name " in the manifest" > "/dev/stderr"; exit 1 } }
' hack/krew/sftpgate.yaml > "$out/sftpgate.yaml"
echo "$archive ($sum) and $out/sftpgate.yaml"
