#!/usr/bin/env bash
# Prints the numbers in launcher/forensics/python_layout.cc for one CPython
# version: offsetof() and sizeof() of the fields the stack reader follows,
# the unicode state bits, and (3.13+) where each offset sits inside
# _Py_DebugOffsets. For people checking or adding a version; not run by the
# tests (it needs that version's headers, which the test machines lack).
#
# Usage: python_offsets.sh INCLUDE_DIR [PYCONFIG_DIR]
#   INCLUDE_DIR   CPython's Include/ in a source tree checked out at the
#                 release tag (git checkout v3.12.5), or an installed
#                 /usr/include/python3.X (Debian's libpython3.X-dev).
#   PYCONFIG_DIR  where pyconfig.h is, when INCLUDE_DIR has none (a source
#                 tree before ./configure): any x86-64 Linux release build's
#                 pyconfig.h does for struct layout, e.g.
#                 /usr/include/x86_64-linux-gnu/python3.11. The script refuses
#                 a pyconfig.h that defines Py_DEBUG, Py_TRACE_REFS or
#                 Py_GIL_DISABLED: those builds lay the structs out otherwise.
#
# Headers for a version the machine has no package for: `apt-get download
# libpython3.X-dev` from a Debian suite that ships it, then `dpkg -x` it and
# pass DIR/usr/include/python3.X and DIR/usr/include (its pyconfig.h sits
# under x86_64-linux-gnu/); or a CPython checkout as above.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 INCLUDE_DIR [PYCONFIG_DIR]" >&2
  exit 2
fi
include_dir=$1
pyconfig_dir=${2:-}
if [[ ! -f "$include_dir/Python.h" ]]; then
  echo "$include_dir has no Python.h: pass CPython's Include/ directory" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/offsets.c" <<'EOF'
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#else
#include <internal/pycore_frame.h>
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include <internal/pycore_stackref.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(Py_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
#error "pyconfig.h is not a default release build's (Py_DEBUG, Py_TRACE_REFS or Py_GIL_DISABLED)"
#endif

#define P(name, v) printf("%-34s %zu\n", name, (size_t)(v))

/* The lowest set bit of a bit field, found by setting the field to 1. */
static int LowestBit(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    for (int j = 0; j < 8; j++)
      if (b[i] >> j & 1) return (int)(i * 8 + j);
  return -1;
}
#define BIT(field)                                   \
  do {                                               \
    PyASCIIObject a;                                 \
    memset(&a, 0, sizeof a);                         \
    a.state.field = 1;                               \
    P("unicode_state_" #field "_bit", LowestBit(&a.state, sizeof a.state)); \
  } while (0)

int main(void) {
  printf("# CPython %s (PY_VERSION_HEX 0x%08lX)\n", PY_VERSION, (unsigned long)PY_VERSION_HEX);
  P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
  P("interp_next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX < 0x030B0000
  P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#else
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#endif
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#endif
#if PY_VERSION_HEX < 0x030B0000
  P("tstate_frame", offsetof(PyThreadState, frame));
  P("frame_previous", offsetof(PyFrameObject, f_back));
  P("frame_code", offsetof(PyFrameObject, f_code));
  P("frame_instr", offsetof(PyFrameObject, f_lasti));
#elif PY_VERSION_HEX < 0x030D0000
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#else
  P("tstate_frame", offsetof(PyThreadState, current_frame));
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#endif
#if PY_VERSION_HEX >= 0x030C0000
  P("owner_cstack", FRAME_OWNED_BY_CSTACK);
#endif
#if PY_VERSION_HEX >= 0x030E0000
  P("owner_interpreter", FRAME_OWNED_BY_INTERPRETER);
  P("stackref_tag_bits (mask ~this)", Py_TAG_BITS);
#endif
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
  P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030B0000
  P("code_instructions", offsetof(PyCodeObject, co_code_adaptive));
#endif
  P("bytes_size", offsetof(PyVarObject, ob_size));
  P("bytes_data", offsetof(PyBytesObject, ob_sval));
  P("unicode_length", offsetof(PyASCIIObject, length));
  P("unicode_state", offsetof(PyASCIIObject, state));
  P("unicode_ascii_data", sizeof(PyASCIIObject));
  P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
  BIT(kind);
  BIT(compact);
  BIT(ascii);
#if PY_VERSION_HEX >= 0x030D0000
  /* Byte positions inside _Py_DebugOffsets (LayoutFromDebugOffsets). */
#define D(f) P("debug_offsets." #f, offsetof(_Py_DebugOffsets, f))
  P("debug_offsets (sizeof)", sizeof(_Py_DebugOffsets));
  D(version);
  D(free_threaded);
  D(runtime_state.size);
  D(runtime_state.interpreters_head);
  D(interpreter_state.size);
  D(interpreter_state.next);
  D(interpreter_state.threads_head);
  D(thread_state.size);
  D(thread_state.next);
  D(thread_state.current_frame);
  D(thread_state.thread_id);
  D(thread_state.native_thread_id);
  D(interpreter_frame.size);
  D(interpreter_frame.previous);
  D(interpreter_frame.executable);
  D(interpreter_frame.instr_ptr);
  D(interpreter_frame.owner);
  D(code_object.size);
  D(code_object.filename);
  D(code_object.name);
  D(code_object.linetable);
  D(code_object.firstlineno);
  D(code_object.co_code_adaptive);
  D(bytes_object.size);
  D(bytes_object.ob_size);
  D(bytes_object.ob_sval);
  D(unicode_object.size);
  D(unicode_object.state);
  D(unicode_object.length);
  D(unicode_object.asciiobject_size);
#endif
  return 0;
}
EOF

flags=(-I"$include_dir")
if [[ ! -f "$include_dir/pyconfig.h" ]]; then
  if [[ -z "$pyconfig_dir" ]]; then
    echo "$include_dir has no pyconfig.h: pass the directory of a release build's pyconfig.h as the second argument" >&2
    exit 2
  fi
  flags+=(-I"$pyconfig_dir")
elif [[ -n "$pyconfig_dir" ]]; then
  # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>.
  flags+=(-I"$pyconfig_dir")
fi
gcc -std=gnu11 -w "${flags[@]}" "$work/offsets.c" -o "$work/offsets"
"$work/offsets"
