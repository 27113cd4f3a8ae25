#!/bin/sh
# check_no_grpc.sh BINARY: the one-node ctrun (launcher/CMakeLists.txt) holds
# nothing of gRPC, protobuf, absl or OpenSSL: no symbol of theirs (nm), so
# none of their static initialisers runs at its start. Prints a few and
# fails otherwise.
binary="$1"
symbols=$(nm -C "$binary") || exit 1
[ -n "$symbols" ] || { echo "$binary: no symbols to check (stripped?)" >&2; exit 1; }
found=$(echo "$symbols" | grep -E 'grpc_|grpc::|grpc_core::|google::protobuf::|absl::|OPENSSL_|SSL_CTX' | head -5)
if [ -n "$found" ]; then
  echo "$binary links gRPC, protobuf, absl or OpenSSL; ctrun-full is the program for them:" >&2
  echo "$found" >&2
  exit 1
fi
