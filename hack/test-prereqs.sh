#!/usr/bin/env bash
# Installs the Debian packages the tests need, when they are missing:
# OpenSSH's sshd and vsftpd (the tests start their own on loopback; the
# system services are never started or touched), make, and CA certificates for the Go module
# proxy, Chromium for the web UI's browser tests, and GnuPG, the peer the
# OpenPGP tests check interoperation with. With the argument
# "bench", also wrk, the load generator of make bench.
set -euo pipefail
missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
[ -x /usr/sbin/vsftpd ] || missing+=(vsftpd)
command -v make >/dev/null || missing+=(make)
[ -e /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
[ -x /usr/bin/chromium ] || missing+=(chromium fonts-dejavu-core)
command -v gpg >/dev/null || missing+=(gnupg)
if [ "${1:-}" = bench ]; then
  command -v wrk >/dev/null || missing+=(wrk)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "test-prereqs: please install as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
# Installing openssh-server or vsftpd would start the system's service
# through invoke-rc.d; a policy-rc.d that denies it keeps them off.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi
echo "test-prereqs: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
