#!/usr/bin/env bash
# Builds the test runtime tools/cnitool (the project's own main over the real libcni) from Debian's packages only:
# Go from trixie (golang-1.24-go + golang-1.24-src) and the libcni sources from unstable
# (golang-github-appc-cni-dev), each unpacked into a private prefix by scripts/debian-private.sh. GOPATH mode, no
# module proxy, no cgo. Cached by (Go version, libcni version, hash of the Go source) under $IPAM_SHIM_DEPS
# (default /var/cache/ipam-shim/deps); the binary is linked at .deps/cnitool. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${IPAM_SHIM_DEPS:-/var/cache/ipam-shim/deps}
src=tools/cnitool/main.go

declare -A ver dir
while read -r pkg version pdir; do
  ver[$pkg]=$version
  dir[$pkg]=$pdir
done < <(bash scripts/debian-private.sh trixie golang-1.24-go golang-1.24-src && bash scripts/debian-private.sh unstable golang-github-appc-cni-dev)

hash=$(sha256sum "$src" | cut -c1-16)
out="$root/cnitool/go${ver[golang-1.24-go]}_libcni${ver[golang-github-appc-cni-dev]}_$hash"
mkdir -p "$root/cnitool"
exec 9>"$root/cnitool/.lock"
flock 9 # one build at a time (two checkouts may build the same version at once)
if [ ! -x "$out/cnitool" ]; then
  work="$out.tmp"
  rm -rf "$work" && mkdir -p "$work"
  # One GOROOT from the two packages, as installing both would make it: golang-1.24-go holds bin/, pkg/tool/ and
  # a few generated files of src/ (zversion.go, zbootstrap.go…); golang-1.24-src holds the rest of src/, api/…
  # src/ is the union (hard links, same file system), the rest symbolic links.
  goroot="$work/goroot"
  mkdir -p "$goroot"
  golib="${dir[golang-1.24-go]}/usr/lib/go-1.24"
  srcshare="${dir[golang-1.24-src]}/usr/share/go-1.24"
  for e in bin pkg VERSION go.env; do ln -s "$golib/$e" "$goroot/$e"; done
  for e in api lib misc test; do ln -s "$srcshare/$e" "$goroot/$e"; done
  cp -al "$srcshare/src" "$goroot/src"
  cp -al "${dir[golang-1.24-go]}/usr/share/go-1.24/src/." "$goroot/src/"
  gopath="$work/gopath"
  mkdir -p "$gopath/src/github.com/containernetworking"
  ln -s "${dir[golang-github-appc-cni-dev]}/usr/share/gocode/src/github.com/containernetworking/cni" "$gopath/src/github.com/containernetworking/cni"
  env -i PATH=/usr/bin:/bin HOME="$work" GOROOT="$goroot" GOPATH="$gopath" GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local \
    GOCACHE="$work/gocache" CGO_ENABLED=0 GOTELEMETRY=off \
    "$goroot/bin/go" build -trimpath -ldflags=-s -o "$work/cnitool" "$src"
  mkdir -p "$out" && mv "$work/cnitool" "$out/cnitool" && rm -rf "$work"
fi
mkdir -p .deps
ln -sfn "$out/cnitool" .deps/cnitool
echo "$out/cnitool"
