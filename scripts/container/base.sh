#!/usr/bin/env bash
# Makes the local base image for ctrun's container: a minimal Debian 12 root
# filesystem with PACKAGEs (and everything they depend on), imported into
# podman (`podman import`; there is no registry to pull debian:12 from).
# Prints the image's name, localhost/ctrun-base:<key>, on stdout.
#
#   scripts/container/base.sh [--from debian|host] PACKAGE...
#
# --from debian (default): mmdebstrap --variant=essential --include=PACKAGEs
#   from the Debian 12 mirror (the host's sources when it has them). .debs
#   already in the host's apt cache (/var/cache/apt/archives, filled by
#   install-deps.sh) are hard-linked in instead of downloaded; the rest is
#   downloaded. ~4 min on 2 cores.
# --from host: the same package set, taken file by file from this host's
#   installed packages (host_rootfs.py): no download, no maintainer scripts,
#   ~40 s. The tests use it (tests/integration/test_container.py).
#
# Cached by content: the key hashes this script, the builder, the mode, the
# package list and (--from host) the versions of the packages it takes; when
# podman already holds localhost/ctrun-base:<key> nothing is built. Documents,
# man pages and translations are left out. Needs root (podman, mmdebstrap).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

from=debian
if [ "${1:-}" = "--from" ]; then from="$2"; shift 2; fi
case "$from" in debian|host) ;; *) echo "base.sh: --from debian|host, not '$from'" >&2; exit 2 ;; esac
[ $# -gt 0 ] || { echo "usage: base.sh [--from debian|host] PACKAGE..." >&2; exit 2; }
mapfile -t pkgs < <(printf '%s\n' "$@" | sort -u)

key=$( {
  cat "$here/base.sh" "$here/host_rootfs.py"
  echo "$from ${pkgs[*]}"
  if [ "$from" = host ]; then /usr/bin/python3 "$here/host_rootfs.py" --versions "${pkgs[@]}"; fi
} | sha256sum | cut -c1-16)
image="localhost/ctrun-base:$key"

# One build at a time on this host (concurrent test runs share the image).
exec 9>"${TMPDIR:-/var/tmp}/ctrun-container-base.lock"
flock -w 900 9 || { echo "base.sh: another build holds the lock" >&2; exit 1; }
if podman image exists "$image"; then echo "$image"; exit 0; fi

work=$(mktemp -d "${TMPDIR:-/var/tmp}/ctrun-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
if [ "$from" = host ]; then
  n=$(/usr/bin/python3 "$here/host_rootfs.py" "$work/rootfs.tar" "${pkgs[@]}")
  echo "base.sh: $n packages from this host" >&2
else
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources="http://deb.debian.org/debian"
  include=$(IFS=,; echo "${pkgs[*]}")
  mmdebstrap --quiet --variant=essential --include="$include" \
    --dpkgopt=force-unsafe-io \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --skip=download/empty --skip=essential/unlink \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives" && { ln /var/cache/apt/archives/*.deb "$1/var/cache/apt/archives/" 2>/dev/null || true; }' \
    --customize-hook='mkdir -p "$1/workspace"' \
    bookworm "$work/rootfs.tar" "$sources" >&2
fi
podman import --quiet --message "ctrun base ($from): ${pkgs[*]}" "$work/rootfs.tar" "$image" >/dev/null
echo "base.sh: $image ($from) in $(( $(date +%s) - start )) s" >&2
echo "$image"
