#!/usr/bin/env bash
# Unpacks Debian packages of another suite (unstable, trixie) into a private prefix, never over the system's own:
#   scripts/debian-private.sh SUITE PACKAGE...
#   DEBIAN_ARCH=arm64 scripts/debian-private.sh SUITE PACKAGE...   (another architecture's packages, e.g. a sysroot)
# prints, one line per package, "PACKAGE VERSION DIR" where DIR is the package's tree unpacked with `dpkg -x`
# (DIR/usr/bin/…). The archive is the one the system's apt already uses (its URI and keyring are read from the
# system's sources), with a private apt state: the system's package lists, cache and dpkg database stay untouched.
# Cached by version under $IPAM_SHIM_DEPS (default /var/cache/ipam-shim/deps): a second run is a look-up only,
# and the lists are refreshed at most once a day (or when a package is not found in them).
set -euo pipefail

suite=${1:?usage: debian-private.sh SUITE PACKAGE...}
shift
[ $# -gt 0 ] || { echo "usage: debian-private.sh SUITE PACKAGE..." >&2; exit 2; }
root=${IPAM_SHIM_DEPS:-/var/cache/ipam-shim/deps}
arch=${DEBIAN_ARCH:-}
# Another architecture gets lists, debs and unpacked trees of its own; the machine's own stays as it was.
tag=$suite${arch:+-$arch}
aptarch=()
[ -z "$arch" ] || aptarch=(-o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
aptdir="$root/apt/$tag"
mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial" "$aptdir/debs" "$root/pkgs"

# The system's Debian archive: the first deb822 stanza or one-line entry naming a Debian suite.
sources() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    awk '/^URIs:/ && !u {u=$2} /^Signed-By:/ && !k {k=$2} END {print u, k}' /etc/apt/sources.list.d/debian.sources
  elif [ -f /etc/apt/sources.list ]; then
    awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list
  fi
}
read -r uri keyring < <(sources) || true
[ -n "${uri:-}" ] || { echo "debian-private: no Debian archive in the system's apt sources" >&2; exit 1; }
keyring=${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}
cat >"$aptdir/sources.list" <<EOF
deb [signed-by=$keyring] $uri $suite main
EOF

apt_private() {
  apt-get -q \
    -o Dir::Etc::SourceList="$aptdir/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
    -o Dir::State::Lists="$aptdir/lists" -o Dir::Cache="$aptdir" -o Dir::Cache::Archives="$aptdir/archives" \
    -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" -o APT::Get::List-Cleanup=0 \
    -o APT::Sandbox::User=root "${aptarch[@]}" "$@"
}
refresh() { apt_private update >/dev/null; touch "$aptdir/updated"; }
# The version the private lists offer (empty when they do not know the package); the system's own dpkg status is
# left out, or a package installed from elsewhere with a higher epoch (kubectl 1:528 from a cloud SDK) would win.
candidate() {
  apt-cache -o Dir::Etc::SourceList="$aptdir/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
    -o Dir::State::Lists="$aptdir/lists" -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" \
    -o Dir::State::status=/dev/null "${aptarch[@]}" show --no-all-versions "$1" 2>/dev/null | awk '/^Version:/ {print $2; exit}'
}

if [ ! -f "$aptdir/updated" ] || [ -n "$(find "$aptdir/updated" -mmin +1440)" ]; then refresh; fi
for pkg in "$@"; do
  version=$(candidate "$pkg" || true)
  if [ -z "$version" ]; then refresh; version=$(candidate "$pkg" || true); fi
  [ -n "$version" ] || { echo "debian-private: $pkg is not in $suite" >&2; exit 1; }
  dir="$root/pkgs/${pkg}_${version//:/%3a}${arch:+_$arch}"
  if [ ! -f "$dir/.unpacked" ]; then
    (cd "$aptdir/debs" && apt_private download "$pkg=$version" >/dev/null)
    deb=$(ls -t "$aptdir/debs/${pkg}_"*.deb | head -n 1)
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" && dpkg -x "$deb" "$dir.tmp"
    touch "$dir.tmp/.unpacked" && rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$pkg $version $dir"
done
