#!/bin/sh
# check_needed.sh BINARY LIBRARY...: the shared objects BINARY names
# (readelf -d, NEEDED) are all among LIBRARY...; prints the others and fails
# otherwise, or when BINARY names no libc (not a dynamically linked program).
binary="$1"
shift
needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') || exit 1
echo "$needed" | grep -qx 'libc\.so\.6' || { echo "$binary: no libc.so.6 among its NEEDED entries" >&2; exit 1; }
status=0
for lib in $needed; do
  ok=no
  for allowed in "$@"; do [ "$lib" = "$allowed" ] && ok=yes; done
  if [ "$ok" = no ]; then
    echo "$binary needs $lib at run time; it may need only: $*" >&2
    status=1
  fi
done
exit $status
