#include "launcher/forensics/python_layout.h"

#include <cstring>

// Every number here is offsetof() or sizeof() in a default (not debug, not
// free-threaded) x86-64 Linux build, as printed by
// tests/launcher/forensics/data/python_offsets.sh from that version's headers;
// the comment above each function names the headers and the release they
// were taken from.

namespace ctrun::launcher {

namespace {

// 3.10: Include/internal/pycore_runtime.h, pycore_interp.h,
// Include/cpython/pystate.h, frameobject.h, code.h, unicodeobject.h; from
// v3.10.0's struct definitions (no native_thread_id before 3.11).
PythonLayout Layout310() {
  PythonLayout l;
  l.major = 3;
  l.minor = 10;
  l.runtime_interpreters_head = 32;
  l.interp_next = 0;
  l.interp_threads_head = 8;  // tstate_head
  l.tstate_next = 8;
  l.tstate_thread_id = 176;
  l.tstate_native_thread_id = 0;
  l.chain = FrameChain::kFrameObject;
  l.tstate_frame = 24;  // frame
  l.frame_previous = 24;  // f_back
  l.frame_code = 32;
  l.frame_instr = 96;  // f_lasti
  l.owner_cstack = -1;
  l.code_filename = 104;
  l.code_name = 112;
  l.code_linetable = 120;
  l.code_firstlineno = 40;
  l.code_instructions = 0;
  l.line_table = LineTable::kLineTable310;
  l.unicode_ascii_data = 48;    // PyASCIIObject still has wstr
  l.unicode_compact_data = 72;
  return l;
}

// 3.11: Include/internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h,
// Include/cpython/pystate.h, code.h, unicodeobject.h; from 3.11.2.
PythonLayout Layout311() {
  PythonLayout l;
  l.major = 3;
  l.minor = 11;
  l.runtime_interpreters_head = 40;
  l.interp_next = 0;
  l.interp_threads_head = 16;
  l.tstate_next = 8;
  l.tstate_thread_id = 152;
  l.tstate_native_thread_id = 160;
  l.chain = FrameChain::kCFrame;
  l.tstate_frame = 56;
  l.cframe_current_frame = 8;
  l.frame_previous = 48;
  l.frame_code = 32;
  l.frame_instr = 56;
  l.frame_owner = 69;
  l.owner_cstack = -1;  // 3.11 has no shim frames
  l.code_filename = 112;
  l.code_name = 120;
  l.code_linetable = 136;
  l.code_firstlineno = 72;
  l.code_instructions = 184;
  l.line_table = LineTable::kLocationTable;
  l.unicode_ascii_data = 48;
  l.unicode_compact_data = 72;
  return l;
}

// 3.12: Include/internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h,
// Include/cpython/pystate.h, code.h, unicodeobject.h; from 3.12.5.
PythonLayout Layout312() {
  PythonLayout l;
  l.major = 3;
  l.minor = 12;
  l.runtime_interpreters_head = 40;
  l.interp_next = 0;
  l.interp_threads_head = 72;
  l.tstate_next = 8;
  l.tstate_thread_id = 136;
  l.tstate_native_thread_id = 144;
  l.chain = FrameChain::kCFrame;
  l.tstate_frame = 56;  // cframe
  l.cframe_current_frame = 0;
  l.frame_previous = 8;
  l.frame_code = 0;  // f_code
  l.frame_instr = 56;  // prev_instr
  l.frame_owner = 70;
  l.owner_cstack = 3;  // FRAME_OWNED_BY_CSTACK
  l.code_filename = 112;
  l.code_name = 120;
  l.code_linetable = 136;
  l.code_firstlineno = 68;
  l.code_instructions = 192;
  l.line_table = LineTable::kLocationTable;
  l.unicode_ascii_data = 40;  // no wstr from 3.12 on
  l.unicode_compact_data = 56;
  return l;
}

// Where, inside one version's _Py_DebugOffsets, each offset used is kept
// (byte positions: offsetof(_Py_DebugOffsets, section.field)), with each
// section's `size` (its struct's sizeof, checked against the offsets), and
// what the table does not carry, from that version's headers.
struct DebugOffsetsFormat {
  int minor;
  size_t free_threaded;
  size_t runtime_size, runtime_interpreters_head;
  size_t interp_size, interp_next, interp_threads_head;
  size_t tstate_size, tstate_next, tstate_current_frame, tstate_thread_id, tstate_native_thread_id;
  size_t frame_size, frame_previous, frame_executable, frame_instr_ptr, frame_owner;
  size_t code_size, code_filename, code_name, code_linetable, code_firstlineno, code_adaptive;
  size_t bytes_size, bytes_ob_size, bytes_ob_sval;
  size_t unicode_size, unicode_state, unicode_length, unicode_ascii_size;
  // Not in the table.
  int owner_cstack;        // FRAME_OWNED_BY_CSTACK
  int owner_interpreter;   // FRAME_OWNED_BY_INTERPRETER; -1 = none
  uint64_t code_pointer_mask;
  uint32_t unicode_compact_data;  // sizeof(PyCompactUnicodeObject)
};

// 3.13: Include/internal/pycore_runtime.h (_Py_DebugOffsets, 584 bytes),
// pycore_frame.h, Include/cpython/unicodeobject.h; from 3.13.5 (3.13.0's
// _Py_DebugOffsets has the same fields).
constexpr DebugOffsetsFormat kFormat313 = {
    .minor = 13,
    .free_threaded = 16,
    .runtime_size = 24, .runtime_interpreters_head = 40,
    .interp_size = 48, .interp_next = 64, .interp_threads_head = 72,
    .tstate_size = 152, .tstate_next = 168, .tstate_current_frame = 184, .tstate_thread_id = 192,
    .tstate_native_thread_id = 200,
    .frame_size = 224, .frame_previous = 232, .frame_executable = 240, .frame_instr_ptr = 248,
    .frame_owner = 264,
    .code_size = 272, .code_filename = 280, .code_name = 288, .code_linetable = 304,
    .code_firstlineno = 312, .code_adaptive = 344,
    .bytes_size = 512, .bytes_ob_size = 520, .bytes_ob_sval = 528,
    .unicode_size = 536, .unicode_state = 544, .unicode_length = 552, .unicode_ascii_size = 560,
    .owner_cstack = 3,
    .owner_interpreter = -1,
    .code_pointer_mask = ~uint64_t{0},  // f_executable is a PyObject*
    .unicode_compact_data = 56,
};

// 3.14: Include/internal/pycore_debug_offsets.h (_Py_DebugOffsets, 760
// bytes: threads_main, set_object, gen_object... added),
// pycore_interpframe_structs.h (owner values), pycore_stackref.h (tag bits),
// Include/cpython/unicodeobject.h; from 3.14.0's field list, numbers from
// 3.14.10.
constexpr DebugOffsetsFormat kFormat314 = {
    .minor = 14,
    .free_threaded = 16,
    .runtime_size = 24, .runtime_interpreters_head = 40,
    .interp_size = 48, .interp_next = 64, .interp_threads_head = 72,
    .tstate_size = 176, .tstate_next = 192, .tstate_current_frame = 208, .tstate_thread_id = 216,
    .tstate_native_thread_id = 224,
    .frame_size = 248, .frame_previous = 256, .frame_executable = 264, .frame_instr_ptr = 272,
    .frame_owner = 288,
    .code_size = 312, .code_filename = 320, .code_name = 328, .code_linetable = 344,
    .code_firstlineno = 352, .code_adaptive = 384,
    .bytes_size = 592, .bytes_ob_size = 600, .bytes_ob_sval = 608,
    .unicode_size = 616, .unicode_state = 624, .unicode_length = 632, .unicode_ascii_size = 640,
    .owner_cstack = 4,
    .owner_interpreter = 3,
    // f_executable is a _PyStackRef; a default build tags its low two bits
    // (Py_TAG_BITS = 3).
    .code_pointer_mask = ~uint64_t{3},
    .unicode_compact_data = 56,
};

// Larger than any struct a table describes (_PyRuntimeState, the largest,
// is about 300 KiB): a size past this is not a real table's.
constexpr uint64_t kMaxStructSize = uint64_t{1} << 24;

// Reads the table's little-endian uint64 fields, each bounds-checked; any
// failed read or check leaves ok() false.
class TableReader {
 public:
  explicit TableReader(std::string_view bytes) : bytes_(bytes) {}

  bool ok() const { return ok_; }

  uint64_t U64(size_t pos) {
    if (pos > bytes_.size() || bytes_.size() - pos < sizeof(uint64_t)) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    std::memcpy(&v, bytes_.data() + pos, sizeof v);  // x86-64 and aarch64 are little-endian
    return v;
  }

  // A section's sizeof, read at `pos`.
  uint64_t Size(size_t pos) {
    const uint64_t size = U64(pos);
    if (size == 0 || size > kMaxStructSize) ok_ = false;
    return size;
  }

  // The offset at `pos` of a field `width` bytes wide in a struct of
  // `size` bytes.
  uint32_t Offset(size_t pos, uint64_t size, uint64_t width) {
    const uint64_t offset = U64(pos);
    if (offset > size || size - offset < width) {
      ok_ = false;
      return 0;
    }
    return static_cast<uint32_t>(offset);  // < kMaxStructSize
  }

 private:
  std::string_view bytes_;
  bool ok_ = true;
};

std::optional<PythonLayout> FromFormat(std::string_view bytes, const DebugOffsetsFormat& f) {
  TableReader r(bytes);
  if (r.U64(f.free_threaded) != 0) return std::nullopt;

  PythonLayout l;
  l.major = 3;
  l.minor = f.minor;
  l.chain = FrameChain::kDirect;
  l.instr_is_next = true;
  l.line_table = LineTable::kLocationTable;
  constexpr uint64_t kPtr = 8;

  const uint64_t runtime = r.Size(f.runtime_size);
  l.runtime_interpreters_head = r.Offset(f.runtime_interpreters_head, runtime, kPtr);

  const uint64_t interp = r.Size(f.interp_size);
  l.interp_next = r.Offset(f.interp_next, interp, kPtr);
  l.interp_threads_head = r.Offset(f.interp_threads_head, interp, kPtr);

  const uint64_t tstate = r.Size(f.tstate_size);
  l.tstate_next = r.Offset(f.tstate_next, tstate, kPtr);
  l.tstate_frame = r.Offset(f.tstate_current_frame, tstate, kPtr);
  l.tstate_thread_id = r.Offset(f.tstate_thread_id, tstate, sizeof(uint64_t));
  l.tstate_native_thread_id = r.Offset(f.tstate_native_thread_id, tstate, sizeof(uint64_t));

  const uint64_t frame = r.Size(f.frame_size);
  l.frame_previous = r.Offset(f.frame_previous, frame, kPtr);
  l.frame_code = r.Offset(f.frame_executable, frame, kPtr);
  l.frame_instr = r.Offset(f.frame_instr_ptr, frame, kPtr);
  l.frame_owner = r.Offset(f.frame_owner, frame, 1);
  l.owner_cstack = f.owner_cstack;
  l.owner_interpreter = f.owner_interpreter;
  l.code_pointer_mask = f.code_pointer_mask;

  const uint64_t code = r.Size(f.code_size);
  l.code_filename = r.Offset(f.code_filename, code, kPtr);
  l.code_name = r.Offset(f.code_name, code, kPtr);
  l.code_linetable = r.Offset(f.code_linetable, code, kPtr);
  l.code_firstlineno = r.Offset(f.code_firstlineno, code, sizeof(int32_t));
  l.code_instructions = r.Offset(f.code_adaptive, code, 1);  // the array's start

  const uint64_t bytes_obj = r.Size(f.bytes_size);
  l.bytes_size = r.Offset(f.bytes_ob_size, bytes_obj, sizeof(int64_t));
  l.bytes_data = r.Offset(f.bytes_ob_sval, bytes_obj, 1);

  const uint64_t unicode = r.Size(f.unicode_size);
  l.unicode_state = r.Offset(f.unicode_state, unicode, sizeof(uint32_t));
  l.unicode_length = r.Offset(f.unicode_length, unicode, sizeof(int64_t));
  // sizeof(PyASCIIObject), where an ASCII string's characters start: within
  // the PyUnicodeObject whose size the table gives.
  l.unicode_ascii_data = r.Offset(f.unicode_ascii_size, unicode, 0);
  l.unicode_compact_data = f.unicode_compact_data;

  if (!r.ok()) return std::nullopt;
  return l;
}

// PY_VERSION_HEX's release level (bits 4-7): 0xA alpha, 0xB beta, 0xC
// candidate, 0xF final.
constexpr uint64_t kReleaseLevelAlpha = 0xA;

}  // namespace

std::optional<PythonLayout> KnownLayout(int major, int minor) {
  if (major != 3) return std::nullopt;
  switch (minor) {
    case 10:
      return Layout310();
    case 11:
      return Layout311();
    case 12:
      return Layout312();
    default:
      return std::nullopt;
  }
}

std::optional<PythonLayout> LayoutFromDebugOffsets(std::string_view bytes) {
  if (bytes.substr(0, kDebugOffsetsCookie.size()) != kDebugOffsetsCookie) return std::nullopt;
  TableReader r(bytes);
  const uint64_t version = r.U64(kDebugOffsetsCookie.size());  // right after the cookie
  if (!r.ok()) return std::nullopt;
  if (((version >> 4) & 0xf) == kReleaseLevelAlpha) return std::nullopt;
  if (VersionMajor(version) != 3) return std::nullopt;
  switch (VersionMinor(version)) {
    case 13:
      return FromFormat(bytes, kFormat313);
    case 14:
      return FromFormat(bytes, kFormat314);
    default:
      return std::nullopt;
  }
}

}  // namespace ctrun::launcher
