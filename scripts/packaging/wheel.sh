#!/usr/bin/env bash
# Builds ctrun's Python wheel from a build tree: `pip install` of it puts
# `ctrun` (with `ctrun-full` beside it) and `ctrund` on the PATH of the environment, as the `ninja` and
# `cmake` wheels do for theirs. Nothing is fetched: the wheel is packed by
# Debian's python3-wheel (`/usr/bin/python3 -m wheel pack`) from a staged tree.
#
#   scripts/packaging/wheel.sh [BUILD_DIR [OUT_DIR]]   (default: build, BUILD_DIR/dist)
#
# Prints the wheel's path. The binaries are the build's, stripped of debug
# info (the .deb strips them the same way). ctrun-full and ctrund link gRPC
# statically, ctrun none of it; all need only libc, libm and the dynamic loader; the script refuses a binary
# that needs more. The platform tag is computed, not assumed: the highest
# GLIBC_x.y symbol version the binaries import gives manylinux_x_y_<arch>
# (PEP 600), so pip refuses the wheel on an older glibc instead of failing
# at run time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-${CTRUN_BUILD_DIR:-$src/build}}" && pwd)"
out="${2:-$build/dist}"

die() { echo "wheel.sh: $*" >&2; exit 1; }
bins=("$build/launcher/ctrun" "$build/launcher/ctrun-full" "$build/rendezvous/ctrund")
for b in "${bins[@]}"; do
  [ -x "$b" ] || die "$b not found: build first (scripts/build.sh)"
done
version="$(sed -n 's/^project(ctrun VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
[ -n "$version" ] || die "no version in $src/CMakeLists.txt (project(ctrun VERSION x.y.z))"

# Run-time needs: the shared objects each binary names, and its glibc.
allowed='^(libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$'
for b in "${bins[@]}"; do
  while read -r lib; do
    [[ "$lib" =~ $allowed ]] || die "$(basename "$b") needs $lib; a wheel's binaries may need only libc and libm (build without CTRUN_SANITIZE)"
  done < <(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done
glibc="$(objdump -T "${bins[@]}" | grep -oE 'GLIBC_2\.[0-9]+' | sort -uV | tail -1)"
[ -n "$glibc" ] || die "no GLIBC symbol versions in the binaries: not dynamically linked against glibc?"
case "$(readelf -h "${bins[0]}" | sed -n 's/^ *Machine: *//p')" in
  *X86-64*) arch=x86_64 ;;
  *AArch64*) arch=aarch64 ;;
  *) die "unknown machine in $(basename "${bins[0]}")'s ELF header" ;;
esac
tag="py3-none-manylinux_2_${glibc#GLIBC_2.}_${arch}"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/ctrun-$version"
data="$root/ctrun-$version.data/scripts"
info="$root/ctrun-$version.dist-info"
mkdir -p "$data" "$info"
for b in "${bins[@]}"; do
  objcopy --strip-debug "$b" "$data/$(basename "$b")"
  chmod 755 "$data/$(basename "$b")"
done
cp "$src/LICENSE" "$info/LICENSE"
# The default node health check (docs/reliability.md) as <venv>/bin/ctrun-health-check:
# a script in bin/, which pip uninstall removes cleanly (data files under
# share/ would leave their empty directories behind).
install -m 755 "$src/scripts/health-check.sh" "$data/ctrun-health-check"
# The header needs $version; the description is written as is (a quoted
# heredoc: its backticks are text, not commands to run).
cat > "$info/METADATA" <<EOF
Metadata-Version: 2.1
Name: ctrun
Version: $version
Summary: A C++ launcher and rendezvous daemon for distributed PyTorch training (a torchrun replacement)
License-File: LICENSE
Requires-Python: >=3.8

EOF
cat >> "$info/METADATA" <<'EOF'
ctrun reads torchrun's flags, the PET_* variables Kubeflow injects and
Slurm's SLURM_* variables, runs a gRPC rendezvous among nodes, and starts one
worker per slot with the environment torchrun gives. The wheel installs
ctrun (the launcher; it runs launches of several nodes and `ctrun status` in
ctrun-full, installed beside it) and ctrund (the standalone rendezvous daemon).
EOF
cat > "$info/WHEEL" <<EOF
Wheel-Version: 1.0
Generator: ctrun scripts/packaging/wheel.sh
Root-Is-Purelib: false
Tag: $tag
EOF
mkdir -p "$out"
/usr/bin/python3 -m wheel pack --dest-dir "$out" "$root" >/dev/null
wheel="$out/ctrun-$version-$tag.whl"
[ -f "$wheel" ] || die "python3 -m wheel pack did not write $wheel"
echo "$wheel"
