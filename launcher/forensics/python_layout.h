// Where CPython keeps a thread's frames, per interpreter version: the byte
// offsets of the few fields that a reader outside the process follows from
// _PyRuntime to each frame's code object, file name, function name and
// line (launcher/forensics/python_stacks.h does the reading). Pure data and
// decoding; no I/O; thread-safe.
//
// The offsets are those of CPython's release builds on 64-bit Linux
// (x86-64, aarch64), taken from its headers with offsetof() for each
// version in the table (tests/launcher/forensics/python_layout_test.cc says
// how to check them again). From 3.13 on the interpreter carries its own
// table, _Py_DebugOffsets, at the start of _PyRuntime: LayoutFromDebugOffsets
// reads that one instead, so a later 3.x with a known table format needs no
// new entry here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ctrun::launcher {

// How a thread reaches its innermost frame.
enum class FrameChain {
  kFrameObject,  // 3.10: tstate->frame, a PyFrameObject; ->f_back
  kCFrame,       // 3.11, 3.12: tstate->cframe->current_frame, a _PyInterpreterFrame; ->previous
  kDirect,       // 3.13+: tstate->current_frame, a _PyInterpreterFrame; ->previous
};

// How a code object maps an instruction to its line.
enum class LineTable {
  kLineTable310,    // 3.10: co_linetable, (byte delta, line delta) pairs (PEP 626)
  kLocationTable,   // 3.11+: co_linetable, the location table (Objects/locations.md)
};

struct PythonLayout {
  int major = 3;
  int minor = 0;

  // _PyRuntimeState
  uint32_t runtime_interpreters_head = 0;  // PyInterpreterState*
  // PyInterpreterState
  uint32_t interp_next = 0;          // PyInterpreterState*
  uint32_t interp_threads_head = 0;  // PyThreadState*
  // PyThreadState
  uint32_t tstate_next = 0;              // PyThreadState*
  uint32_t tstate_thread_id = 0;         // unsigned long (pthread_t)
  uint32_t tstate_native_thread_id = 0;  // unsigned long (the TID); 0 = none (3.10 has none)
  FrameChain chain = FrameChain::kCFrame;
  uint32_t tstate_frame = 0;         // kFrameObject: frame; kCFrame: cframe; kDirect: current_frame
  uint32_t cframe_current_frame = 0;  // kCFrame only

  // The frame (PyFrameObject for kFrameObject, else _PyInterpreterFrame)
  uint32_t frame_previous = 0;  // frame* (f_back / previous)
  uint32_t frame_code = 0;      // PyCodeObject* (3.13+: f_executable, any object)
  // kFrameObject: int f_lasti (in code units). Otherwise: a _Py_CODEUNIT*
  // (prev_instr up to 3.12, the instruction before the next one; instr_ptr
  // from 3.13, the one being run).
  uint32_t frame_instr = 0;
  bool instr_is_next = false;  // 3.13+: instr_ptr points at the current instruction
  // The frame's owner byte; frames owned by the C stack are shims with no
  // Python code (3.12+), skipped. 0 with owner_cstack < 0 = no such field.
  uint32_t frame_owner = 0;
  int owner_cstack = -1;
  // 3.14+: frames owned by the interpreter (FRAME_OWNED_BY_INTERPRETER, its
  // entry frames, no Python code) are shims too, skipped, as CPython's own
  // _PyFrame_IsIncomplete does. -1 = no such owner value.
  int owner_interpreter = -1;
  // 3.14 keeps f_executable as a _PyStackRef: the low bits are tags.
  uint64_t code_pointer_mask = ~uint64_t{0};

  // PyCodeObject
  uint32_t code_filename = 0;     // PyUnicodeObject*
  uint32_t code_name = 0;         // PyUnicodeObject* (co_name, as faulthandler prints)
  uint32_t code_linetable = 0;    // PyBytesObject*
  uint32_t code_firstlineno = 0;  // int
  // Where the instructions start, from the code object's address (3.11+:
  // co_code_adaptive); kFrameObject: unused (f_lasti is an index).
  uint32_t code_instructions = 0;
  LineTable line_table = LineTable::kLocationTable;

  // PyBytesObject
  uint32_t bytes_size = 16;  // ob_size
  uint32_t bytes_data = 32;  // ob_sval

  // PyUnicodeObject: compact strings only (every code object's are).
  uint32_t unicode_length = 16;   // Py_ssize_t, in code points
  // The state bit field: kind bits 2-4, compact bit 5, ascii bit 6 in every
  // version in the table and every one LayoutFromDebugOffsets accepts
  // (3.14's free-threaded builds move them; those are refused).
  uint32_t unicode_state = 32;
  uint32_t unicode_ascii_data = 48;    // sizeof(PyASCIIObject): an ASCII string's characters
  uint32_t unicode_compact_data = 72;  // sizeof(PyCompactUnicodeObject): the others'
};

// The built-in table's entry for major.minor (3.10, 3.11, 3.12), or nullopt.
std::optional<PythonLayout> KnownLayout(int major, int minor);

// The start of _Py_DebugOffsets (3.13+): "xdebugpy" then the version as
// PY_VERSION_HEX (uint64).
inline constexpr std::string_view kDebugOffsetsCookie = "xdebugpy";

// A layout from the _Py_DebugOffsets at the start of a 3.13+ _PyRuntime:
// `bytes` is what was read from there (at least kDebugOffsetsReadSize bytes,
// fewer when the mapping ends sooner). nullopt when the cookie is not there;
// the version is one whose table format is not known (3.13 and 3.14 are;
// alpha releases, whose tables were still changing, are not); the build is
// free-threaded (other tag bits and unicode state bits); `bytes` ends before
// a field read; or an offset does not fit inside the struct size the table
// gives for it (not a real table). Never reads outside `bytes`.
inline constexpr size_t kDebugOffsetsReadSize = 1024;
std::optional<PythonLayout> LayoutFromDebugOffsets(std::string_view bytes);

// PY_VERSION_HEX's major and minor: 0x030B02F0 -> {3, 11}.
inline int VersionMajor(uint64_t hex) { return static_cast<int>((hex >> 24) & 0xff); }
inline int VersionMinor(uint64_t hex) { return static_cast<int>((hex >> 16) & 0xff); }

}  // namespace ctrun::launcher
