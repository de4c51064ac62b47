#!/usr/bin/env bash
# Installs everything the demo and the tests need on a Debian 12 machine (as root): the real parts
# (reference CNI plugins, podman, ebtables, nftables, ping) from Debian, the npm packages with npm ci.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(containernetworking-plugins containerd podman runc mmdebstrap busybox-static ebtables nftables iproute2 iputils-ping util-linux procps strace prometheus)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # Strict: the lock file is complete (rollup is pinned by `overrides` to a release whose platform packages all
  # exist in the registry), so `npm ci` installs exactly what it records or fails.
  npm ci --no-audit --no-fund --loglevel=error
fi
