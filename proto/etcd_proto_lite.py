#!/usr/bin/env python3
"""Copies one of etcd's .proto files (as Debian ships them) with what ctrun
does not need taken out: the gogoproto and google.api imports and options
(Go code generation and the HTTP gateway). The result is built for protobuf's
lite runtime, so ctrun registers no descriptors for etcd at every start.

Usage: etcd_proto_lite.py IN OUT. The original file is left untouched."""
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
text = open(src, encoding="utf-8").read()
text = re.sub(r'^import "(gogoproto/gogo|google/api/annotations)\.proto";\n', "", text, flags=re.M)
text = re.sub(r"^\s*option \(gogoproto\.[^;]*;\n", "", text, flags=re.M)
text = re.sub(r"\s*\[\(gogoproto\.[^\]]*\]", "", text)
text = re.sub(r"additional_bindings\s*\{[^{}]*\}", "", text)  # nested in some http options
text = re.sub(r"\s*option \(google\.api\.http\) = \{[^{}]*\};", "", text)
text, n = re.subn(r"^(package [\w.]+;)$", r'\1\noption optimize_for = LITE_RUNTIME;', text, count=1, flags=re.M)
if n != 1 or "gogoproto" in text or "google.api" in text:
    sys.exit(f"etcd_proto_lite.py: {src}: unexpected layout (package line or options left)")
with open(dst, "w", encoding="utf-8") as f:
    f.write(text)
