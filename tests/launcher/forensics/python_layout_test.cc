// The per-version CPython layouts, and _Py_DebugOffsets parsing on tables
// built here.
//
// Where the numbers come from: tests/launcher/forensics/data/python_offsets.sh
// compiles a small program against one version's headers and prints every
// offset in launcher/forensics/python_layout.cc (offsetof/sizeof in a default
// x86-64 Linux build, the unicode state bits, and for 3.13+ each field's byte
// position inside _Py_DebugOffsets). Run it by hand with that version's
// headers (a CPython checkout at the release tag, or Debian's
// libpython3.X-dev unpacked with dpkg -x; see the script's header); it is not
// run here, since the test machines have only one Python's headers.
//
// The numbers were checked so: 3.11 from Debian's 3.11.2 headers; 3.12 from
// CPython 3.12.5's Include/ with Debian 3.11's pyconfig.h; 3.13 and 3.14 from
// Debian's libpython3.13-dev 3.13.5 and libpython3.14-dev 3.14.10, whose
// libpython3.X.a also gave the real _Py_DebugOffsets bytes (the .PyRuntime
// section of pylifecycle.o): LayoutFromDebugOffsets on them equals the
// headers' offsetof values field for field. 3.10 from v3.10.0's struct
// definitions as two debuggers carry them (py-spy's bindgen output, pystack's
// copies), which agree.
#include "launcher/forensics/python_layout.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace ctrun::launcher {
namespace {

// PY_VERSION_HEX values.
constexpr uint64_t kV3_13_5 = 0x030D05F0;
constexpr uint64_t kV3_14_10 = 0x030E0AF0;

struct Field {
  size_t pos;  // byte position inside _Py_DebugOffsets
  uint64_t value;
};

// A _Py_DebugOffsets of `size` bytes: the cookie, `version`, then `fields`
// (little-endian uint64 each); zero elsewhere.
std::string Table(uint64_t version, const std::vector<Field>& fields, size_t size = kDebugOffsetsReadSize) {
  std::string t(size, '\0');
  std::memcpy(t.data(), kDebugOffsetsCookie.data(), kDebugOffsetsCookie.size());
  std::memcpy(t.data() + 8, &version, sizeof version);
  for (const Field& f : fields) {
    REQUIRE(f.pos + sizeof f.value <= size);
    std::memcpy(t.data() + f.pos, &f.value, sizeof f.value);
  }
  return t;
}

// Byte positions in 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h).
struct p313 {
  static constexpr size_t kFreeThreaded = 16;
  static constexpr size_t kRuntimeSize = 24, kInterpretersHead = 40;
  static constexpr size_t kInterpSize = 48, kInterpNext = 64, kThreadsHead = 72;
  static constexpr size_t kTstateSize = 152, kTstateNext = 168, kCurrentFrame = 184, kThreadId = 192,
                 kNativeThreadId = 200;
  static constexpr size_t kFrameSize = 224, kPrevious = 232, kExecutable = 240, kInstrPtr = 248, kOwner = 264;
  static constexpr size_t kCodeSize = 272, kFilename = 280, kName = 288, kLinetable = 304, kFirstlineno = 312,
                 kCodeAdaptive = 344;
  static constexpr size_t kBytesSize = 512, kObSize = 520, kObSval = 528;
  static constexpr size_t kUnicodeSize = 536, kState = 544, kLength = 552, kAsciiSize = 560;
  static constexpr size_t kEnd = kAsciiSize + 8;  // past the last field read
};

// Byte positions in 3.14's (Include/internal/pycore_debug_offsets.h).
struct p314 {
  static constexpr size_t kFreeThreaded = 16;
  static constexpr size_t kRuntimeSize = 24, kInterpretersHead = 40;
  static constexpr size_t kInterpSize = 48, kInterpNext = 64, kThreadsHead = 72;
  static constexpr size_t kTstateSize = 176, kTstateNext = 192, kCurrentFrame = 208, kThreadId = 216,
                 kNativeThreadId = 224;
  static constexpr size_t kFrameSize = 248, kPrevious = 256, kExecutable = 264, kInstrPtr = 272, kOwner = 288;
  static constexpr size_t kCodeSize = 312, kFilename = 320, kName = 328, kLinetable = 344, kFirstlineno = 352,
                 kCodeAdaptive = 384;
  static constexpr size_t kBytesSize = 592, kObSize = 600, kObSval = 608;
  static constexpr size_t kUnicodeSize = 616, kState = 624, kLength = 632, kAsciiSize = 640;
};

// Every section 64 KiB, every offset distinct, so that a field read from
// the wrong position lands in the wrong member and shows.
constexpr uint64_t kSection = 0x10000;

template <typename P>
std::vector<Field> DistinctFields() {
  return {
      {P::kRuntimeSize, kSection}, {P::kInterpretersHead, 1001},
      {P::kInterpSize, kSection},  {P::kInterpNext, 1002},       {P::kThreadsHead, 1003},
      {P::kTstateSize, kSection},  {P::kTstateNext, 1004},       {P::kCurrentFrame, 1005},
      {P::kThreadId, 1006},        {P::kNativeThreadId, 1007},
      {P::kFrameSize, kSection},   {P::kPrevious, 1008},         {P::kExecutable, 1009},
      {P::kInstrPtr, 1010},        {P::kOwner, 1011},
      {P::kCodeSize, kSection},    {P::kFilename, 1012},         {P::kName, 1013},
      {P::kLinetable, 1014},       {P::kFirstlineno, 1015},      {P::kCodeAdaptive, 1016},
      {P::kBytesSize, kSection},   {P::kObSize, 1017},           {P::kObSval, 1018},
      {P::kUnicodeSize, kSection}, {P::kState, 1019},            {P::kLength, 1020},
      {P::kAsciiSize, 1021},
  };
}

void CheckDistinct(const PythonLayout& l) {
  CHECK(l.runtime_interpreters_head == 1001);
  CHECK(l.interp_next == 1002);
  CHECK(l.interp_threads_head == 1003);
  CHECK(l.tstate_next == 1004);
  CHECK(l.tstate_frame == 1005);
  CHECK(l.tstate_thread_id == 1006);
  CHECK(l.tstate_native_thread_id == 1007);
  CHECK(l.frame_previous == 1008);
  CHECK(l.frame_code == 1009);
  CHECK(l.frame_instr == 1010);
  CHECK(l.frame_owner == 1011);
  CHECK(l.code_filename == 1012);
  CHECK(l.code_name == 1013);
  CHECK(l.code_linetable == 1014);
  CHECK(l.code_firstlineno == 1015);
  CHECK(l.code_instructions == 1016);
  CHECK(l.bytes_size == 1017);
  CHECK(l.bytes_data == 1018);
  CHECK(l.unicode_state == 1019);
  CHECK(l.unicode_length == 1020);
  CHECK(l.unicode_ascii_data == 1021);
  CHECK(l.chain == FrameChain::kDirect);
  CHECK(l.line_table == LineTable::kLocationTable);
  CHECK(l.instr_is_next);
}

TEST_CASE("KnownLayout: 3.10 walks PyFrameObjects and decodes the PEP 626 line table") {
  const auto l = KnownLayout(3, 10);
  REQUIRE(l);
  CHECK(l->minor == 10);
  CHECK(l->chain == FrameChain::kFrameObject);
  CHECK(l->line_table == LineTable::kLineTable310);
  CHECK(l->runtime_interpreters_head == 32);
  CHECK(l->interp_threads_head == 8);
  CHECK(l->tstate_thread_id == 176);
  CHECK(l->tstate_native_thread_id == 0);  // added in 3.11
  CHECK(l->tstate_frame == 24);
  CHECK(l->frame_previous == 24);
  CHECK(l->frame_code == 32);
  CHECK(l->frame_instr == 96);
  CHECK(l->owner_cstack == -1);
  CHECK(l->owner_interpreter == -1);
  CHECK(l->code_name == 112);
  CHECK(l->code_linetable == 120);
  CHECK(l->code_firstlineno == 40);
  CHECK(l->unicode_ascii_data == 48);
  CHECK(l->unicode_compact_data == 72);
  CHECK_FALSE(l->instr_is_next);
}

TEST_CASE("KnownLayout: 3.11 goes through the cframe, without shim frames") {
  const auto l = KnownLayout(3, 11);
  REQUIRE(l);
  CHECK(l->chain == FrameChain::kCFrame);
  CHECK(l->line_table == LineTable::kLocationTable);
  CHECK(l->tstate_frame == 56);
  CHECK(l->cframe_current_frame == 8);
  CHECK(l->frame_code == 32);
  CHECK(l->frame_previous == 48);
  CHECK(l->tstate_native_thread_id == 160);
  CHECK(l->owner_cstack == -1);
  CHECK(l->code_instructions == 184);
  CHECK(l->unicode_ascii_data == 48);
  CHECK_FALSE(l->instr_is_next);
}

TEST_CASE("KnownLayout: 3.12 skips C-stack shims and has no wstr") {
  const auto l = KnownLayout(3, 12);
  REQUIRE(l);
  CHECK(l->chain == FrameChain::kCFrame);
  CHECK(l->line_table == LineTable::kLocationTable);
  CHECK(l->interp_threads_head == 72);
  CHECK(l->tstate_thread_id == 136);
  CHECK(l->tstate_native_thread_id == 144);
  CHECK(l->cframe_current_frame == 0);
  CHECK(l->frame_code == 0);
  CHECK(l->frame_instr == 56);
  CHECK(l->frame_owner == 70);
  CHECK(l->owner_cstack == 3);
  CHECK(l->owner_interpreter == -1);
  CHECK(l->code_firstlineno == 68);
  CHECK(l->code_instructions == 192);
  CHECK(l->unicode_ascii_data == 40);
  CHECK(l->unicode_compact_data == 56);
  CHECK(l->code_pointer_mask == ~uint64_t{0});
}

TEST_CASE("KnownLayout: other versions are not in the table") {
  CHECK_FALSE(KnownLayout(3, 9));
  CHECK_FALSE(KnownLayout(3, 13));  // from _Py_DebugOffsets instead
  CHECK_FALSE(KnownLayout(2, 7));
  CHECK_FALSE(KnownLayout(4, 11));
}

TEST_CASE("LayoutFromDebugOffsets: 3.13 puts each offset in its member") {
  const auto l = LayoutFromDebugOffsets(Table(kV3_13_5, DistinctFields<p313>()));
  REQUIRE(l);
  CHECK(l->major == 3);
  CHECK(l->minor == 13);
  CheckDistinct(*l);
  CHECK(l->owner_cstack == 3);
  CHECK(l->owner_interpreter == -1);
  CHECK(l->code_pointer_mask == ~uint64_t{0});
  CHECK(l->unicode_compact_data == 56);
}

TEST_CASE("LayoutFromDebugOffsets: 3.14 puts each offset in its member") {
  const auto l = LayoutFromDebugOffsets(Table(kV3_14_10, DistinctFields<p314>()));
  REQUIRE(l);
  CHECK(l->minor == 14);
  CheckDistinct(*l);
  CHECK(l->owner_cstack == 4);
  CHECK(l->owner_interpreter == 3);
  CHECK(l->code_pointer_mask == ~uint64_t{3});
  CHECK(l->unicode_compact_data == 56);
}

// The sizes and offsets in Debian's 3.13.5 build (its _PyRuntime's table):
// the checks on them must let a real table through.
TEST_CASE("LayoutFromDebugOffsets: 3.13.5's real numbers") {
  using P = p313;
  const auto l = LayoutFromDebugOffsets(Table(kV3_13_5, {
      {P::kRuntimeSize, 283376}, {P::kInterpretersHead, 632},
      {P::kInterpSize, 194976}, {P::kInterpNext, 7264}, {P::kThreadsHead, 7344},
      {P::kTstateSize, 304}, {P::kTstateNext, 8}, {P::kCurrentFrame, 72}, {P::kThreadId, 152},
      {P::kNativeThreadId, 160},
      {P::kFrameSize, 80}, {P::kPrevious, 8}, {P::kExecutable, 0}, {P::kInstrPtr, 56}, {P::kOwner, 70},
      {P::kCodeSize, 208}, {P::kFilename, 112}, {P::kName, 120}, {P::kLinetable, 136}, {P::kFirstlineno, 68},
      {P::kCodeAdaptive, 200},
      {P::kBytesSize, 40}, {P::kObSize, 16}, {P::kObSval, 32},
      {P::kUnicodeSize, 64}, {P::kState, 32}, {P::kLength, 16}, {P::kAsciiSize, 40},
  }));
  REQUIRE(l);
  CHECK(l->runtime_interpreters_head == 632);
  CHECK(l->tstate_frame == 72);
  CHECK(l->frame_owner == 70);
  CHECK(l->code_instructions == 200);
  CHECK(l->unicode_ascii_data == 40);
}

TEST_CASE("LayoutFromDebugOffsets: 3.14.10's real numbers") {
  using P = p314;
  const auto l = LayoutFromDebugOffsets(Table(kV3_14_10, {
      {P::kRuntimeSize, 316616}, {P::kInterpretersHead, 808},
      {P::kInterpSize, 225864}, {P::kInterpNext, 7272}, {P::kThreadsHead, 7344},
      {P::kTstateSize, 832}, {P::kTstateNext, 8}, {P::kCurrentFrame, 72}, {P::kThreadId, 152},
      {P::kNativeThreadId, 160},
      {P::kFrameSize, 88}, {P::kPrevious, 8}, {P::kExecutable, 0}, {P::kInstrPtr, 56}, {P::kOwner, 74},
      {P::kCodeSize, 216}, {P::kFilename, 112}, {P::kName, 120}, {P::kLinetable, 136}, {P::kFirstlineno, 68},
      {P::kCodeAdaptive, 208},
      {P::kBytesSize, 40}, {P::kObSize, 16}, {P::kObSval, 32},
      {P::kUnicodeSize, 64}, {P::kState, 32}, {P::kLength, 16}, {P::kAsciiSize, 40},
  }));
  REQUIRE(l);
  CHECK(l->runtime_interpreters_head == 808);
  CHECK(l->frame_owner == 74);
  CHECK(l->code_instructions == 208);
}

TEST_CASE("LayoutFromDebugOffsets: no cookie, unknown versions and alphas give nothing") {
  std::string wrong_cookie = Table(kV3_13_5, DistinctFields<p313>());
  wrong_cookie[0] = 'X';
  CHECK_FALSE(LayoutFromDebugOffsets(wrong_cookie));
  CHECK_FALSE(LayoutFromDebugOffsets(""));
  CHECK_FALSE(LayoutFromDebugOffsets(Table(0x036300F0, DistinctFields<p313>())));  // 3.99.0
  CHECK_FALSE(LayoutFromDebugOffsets(Table(0x030C05F0, DistinctFields<p313>())));  // 3.12.5: none
  CHECK_FALSE(LayoutFromDebugOffsets(Table(0x040D00F0, DistinctFields<p313>())));  // 4.13.0
  CHECK_FALSE(LayoutFromDebugOffsets(Table(0x030D00A6, DistinctFields<p313>())));  // 3.13.0a6
  CHECK(LayoutFromDebugOffsets(Table(0x030D00B1, DistinctFields<p313>())));        // 3.13.0b1
}

TEST_CASE("LayoutFromDebugOffsets: free-threaded builds are refused") {
  auto fields = DistinctFields<p314>();
  fields.push_back({p314::kFreeThreaded, 1});
  CHECK_FALSE(LayoutFromDebugOffsets(Table(kV3_14_10, fields)));
}

TEST_CASE("LayoutFromDebugOffsets: a table cut short gives nothing, never a read past it") {
  const std::string full = Table(kV3_13_5, DistinctFields<p313>());
  for (size_t n = 0; n < p313::kEnd; ++n) {
    // A copy of exactly n bytes, so a sanitizer sees any read past it.
    const std::string cut = full.substr(0, n);
    INFO("bytes: " << n);
    CHECK_FALSE(LayoutFromDebugOffsets(cut));
  }
  CHECK(LayoutFromDebugOffsets(full.substr(0, p313::kEnd)));
}

TEST_CASE("LayoutFromDebugOffsets: offsets outside their struct give nothing") {
  // The field's offset plus its width must fit the section's size.
  auto at_end = DistinctFields<p313>();
  at_end.push_back({p313::kNativeThreadId, kSection - 4});  // an 8-byte field
  CHECK_FALSE(LayoutFromDebugOffsets(Table(kV3_13_5, at_end)));

  auto huge = DistinctFields<p313>();
  huge.push_back({p313::kName, uint64_t{1} << 40});
  CHECK_FALSE(LayoutFromDebugOffsets(Table(kV3_13_5, huge)));

  auto zero_size = DistinctFields<p313>();
  zero_size.push_back({p313::kCodeSize, 0});
  CHECK_FALSE(LayoutFromDebugOffsets(Table(kV3_13_5, zero_size)));

  auto huge_size = DistinctFields<p313>();
  huge_size.push_back({p313::kTstateSize, uint64_t{1} << 32});
  CHECK_FALSE(LayoutFromDebugOffsets(Table(kV3_13_5, huge_size)));

  // Just fitting is fine.
  auto fits = DistinctFields<p313>();
  fits.push_back({p313::kNativeThreadId, kSection - 8});
  const auto l = LayoutFromDebugOffsets(Table(kV3_13_5, fits));
  REQUIRE(l);
  CHECK(l->tstate_native_thread_id == kSection - 8);
}

}  // namespace
}  // namespace ctrun::launcher
