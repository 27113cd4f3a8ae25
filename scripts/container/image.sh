#!/usr/bin/env bash
# Builds ctrun's container image from a build tree: the local base image
# (base.sh) with the Debian packages the binaries load (found with ldd and
# dpkg -S), Python torch and the Fashion-MNIST data set, then the Containerfile
# beside this script (ctrun, ctrun-full, ctrund, ctrun-fashion-mnist, examples/;
# ENTRYPOINT ["ctrun"]). Prints the image's name, localhost/ctrun:<key>.
#
#   scripts/container/image.sh [--from debian|host] [BUILD_DIR]   (default build)
#
# Cached by content: the key hashes the base image, the Containerfile and the
# staged context (binaries stripped of debug info); an existing image is
# reused at no cost. CTRUN_CONTAINER_PACKAGES adds packages to the base.
# libhwloc15 is added by name: ctrun opens it with dlopen (--numa-binding
# only), so ldd does not see it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"

from=debian
if [ "${1:-}" = "--from" ]; then from="$2"; shift 2; fi
build="$(cd "${1:-$src/build}" && pwd)"
bins=("$build/launcher/ctrun" "$build/launcher/ctrun-full" "$build/rendezvous/ctrund" "$build/trainer/apps/ctrun-fashion-mnist")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "image.sh: $b not found: build first (scripts/build.sh)" >&2; exit 1; }
done

# The packages owning the libraries the binaries load, in one dpkg -S (dpkg
# knows some under /lib, some under /usr/lib on a merged-/usr system).
mapfile -t libs < <(ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u)
mapfile -t reals < <(realpath "${libs[@]}")
candidates=()
for i in "${!libs[@]}"; do
  l="${libs[$i]}" r="${reals[$i]}"
  candidates+=("$l" "$r" "${l#/usr}" "/usr$l" "${r#/usr}" "/usr${r#/usr}")
done
declare -A own=()
while read -r pkg path; do own[$path]="$pkg"; done < <(dpkg -S "${candidates[@]}" 2>/dev/null | sed -n 's/^\([^:, ]*\)[^ ]* \(.*\)$/\1 \2/p')
pkgs=(python3-torch python3-numpy dataset-fashion-mnist libhwloc15 ${CTRUN_CONTAINER_PACKAGES:-})
for i in "${!libs[@]}"; do
  l="${libs[$i]}" r="${reals[$i]}" p=""
  for c in "$l" "$r" "${l#/usr}" "/usr$l" "${r#/usr}" "/usr${r#/usr}"; do p="${p:-${own[$c]:-}}"; done
  [ -n "$p" ] || { echo "image.sh: no Debian package has $l" >&2; exit 1; }
  pkgs+=("$p")
done
base=$("$here/base.sh" --from "$from" "${pkgs[@]}")

ctx=$(mktemp -d "${TMPDIR:-/var/tmp}/ctrun-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/bin"
for b in "${bins[@]}"; do objcopy --strip-debug "$b" "$ctx/bin/$(basename "$b")"; done
cp -r "$src/examples" "$ctx/examples"
cp "$here/Containerfile" "$ctx/Containerfile"
key=$( { echo "$base"; podman image inspect --format '{{.Id}}' "$base";
         cd "$ctx" && find . -type f | sort | xargs sha256sum; } | sha256sum | cut -c1-16)
image="localhost/ctrun:$key"
if ! podman image exists "$image"; then
  start=$(date +%s)
  podman build --quiet --build-arg "BASE=$base" -f "$ctx/Containerfile" -t "$image" "$ctx" >/dev/null
  echo "image.sh: $image in $(( $(date +%s) - start )) s" >&2
fi
echo "$image"
