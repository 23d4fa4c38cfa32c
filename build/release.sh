#!/bin/sh
# Release build: static relay binaries for every platform relay ships on,
# each packed with LICENSE, NOTICE and README.md, and their SHA-256 sums.
#
#   build/release.sh              # version from git describe --tags --always --dirty
#   build/release.sh v1.2.3       # version given
#   TARGETS="darwin/arm64" build/release.sh v1.2.3   # some targets only
#   DIST=/tmp/out build/release.sh                    # another output directory
#
# Writes dist/relay-VERSION-OS-ARCH.tar.gz (a directory of that name holding
# relay, LICENSE, NOTICE and README.md) and dist/SHA256SUMS, which lists the
# archives of this run. Needs only Go,
# git (for the version and commit, when run in a checkout) and the tar,
# gzip and sha256sum (or shasum) every Unix has: Go cross-compiles
# natively, and CGO_ENABLED=0 makes every binary static.
# SOURCE_DATE_EPOCH, when set, is the build time stamped and given to the
# archive's files, so two builds of one commit are byte for byte the same.
set -eu
cd "$(dirname "$0")/.."

targets=${TARGETS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64"}
dist=${DIST:-dist}

if [ $# -gt 1 ]; then
  echo "usage: build/release.sh [VERSION]" >&2
  exit 2
fi
if [ $# -eq 1 ]; then
  version=$1
else
  version=$(git describe --tags --always --dirty 2>/dev/null) || {
    echo "release.sh: not a git checkout: give the version, e.g. build/release.sh v1.2.3" >&2
    exit 2
  }
fi
# The version names files, so it may not hold a path or a space.
case $version in
  "" | *[!A-Za-z0-9._+-]*)
    echo "release.sh: version \"$version\" may hold only letters, digits and . _ + -" >&2
    exit 2 ;;
esac
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
    date -u -r "$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi

pkg=relay/internal/version
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"

# GNU tar can make the archive independent of who built it and when;
# other tars (bsdtar on macOS) pack as they are.
tarflags=""
if tar --version 2>/dev/null | grep -q 'GNU tar'; then
  tarflags="--sort=name --owner=0 --group=0 --numeric-owner"
  if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    tarflags="$tarflags --mtime=@$SOURCE_DATE_EPOCH"
  fi
fi
if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum "$@"; }
else
  sha256() { shasum -a 256 "$@"; }
fi

mkdir -p "$dist"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
archives=""
for target in $targets; do
  os=${target%/*}
  arch=${target#*/}
  name=relay-$version-$os-$arch
  echo "building $name" >&2
  mkdir "$work/$name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch \
    go build -trimpath -ldflags "$ldflags" -o "$work/$name/relay" ./cmd/relay
  cp LICENSE NOTICE README.md "$work/$name/"
  # shellcheck disable=SC2086
  # sh has no pipefail: the tar goes to a file first, so a failed tar
  # stops the build (set -e) instead of leaving a short archive.
  tar -C "$work" $tarflags -cf "$work/$name.tar" "$name"
  gzip -9n <"$work/$name.tar" >"$dist/$name.tar.gz"
  archives="$archives $name.tar.gz"
done
# shellcheck disable=SC2086
(cd "$dist" && sha256 $archives >SHA256SUMS)
cat "$dist/SHA256SUMS"
