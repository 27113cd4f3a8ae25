#include "launcher/forensics/python_linetable.h"

#include <cstdint>

namespace ctrun::launcher {

namespace {

// 3.10 (PEP 626): pairs of (bytes covered, signed line delta); a delta of
// -128 marks a range with no line. Addresses are in bytes.
int Line310(std::string_view t, int first_line, int unit) {
  const int64_t addr = int64_t{unit} * 2;
  int64_t end = 0;
  int line = first_line;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    const int64_t start = end;
    end += static_cast<unsigned char>(t[i]);
    const int delta = static_cast<signed char>(t[i + 1]);
    int range_line = -1;
    if (delta != -128) {
      line += delta;
      range_line = line;
    }
    if (addr >= start && addr < end) return range_line;
  }
  return -1;
}

// The location table's variable-length integers: 6-bit chunks, least
// significant first, bit 6 set on every chunk but the last.
struct Reader {
  std::string_view t;
  size_t pos = 0;
  bool ok = true;

  int Byte() {
    if (pos >= t.size()) {
      ok = false;
      return 0;
    }
    return static_cast<unsigned char>(t[pos++]);
  }
  uint64_t Varint() {
    int b = Byte();
    uint64_t v = b & 63;
    int shift = 0;
    while (ok && (b & 64)) {
      if (shift >= 54) {  // longer than any 64-bit value: not a table CPython wrote
        ok = false;
        return 0;
      }
      b = Byte();
      shift += 6;
      v |= static_cast<uint64_t>(b & 63) << shift;
    }
    return v;
  }
  int64_t Svarint() {
    const uint64_t u = Varint();
    return (u & 1) ? -static_cast<int64_t>(u >> 1) : static_cast<int64_t>(u >> 1);
  }
};

// 3.11+ (Objects/locations.md): entries that each cover 1-8 code units; the
// first byte of an entry has bit 7 set, a 4-bit code and the length - 1.
int LocationTable(std::string_view t, int first_line, int unit) {
  Reader r{t};
  int64_t line = first_line;
  int64_t start = 0;
  while (r.pos < t.size()) {
    const int head = r.Byte();
    if ((head & 0x80) == 0) return -1;  // not at an entry's start: a cut or bad table
    const int code = (head >> 3) & 15;
    const int64_t end = start + (head & 7) + 1;
    bool has_line = true;
    if (code == 15) {  // no location
      has_line = false;
    } else if (code == 14) {  // long form: line delta, end line delta, start and end column
      line += r.Svarint();
      r.Varint();
      r.Varint();
      r.Varint();
    } else if (code == 13) {  // no column: line delta
      line += r.Svarint();
    } else if (code >= 10) {  // one line: delta code - 10, start and end column
      line += code - 10;
      r.Byte();
      r.Byte();
    } else {  // short form: same line, one column byte
      r.Byte();
    }
    if (!r.ok) return -1;
    if (unit >= start && unit < end) return has_line ? static_cast<int>(line) : -1;
    start = end;
  }
  return -1;
}

}  // namespace

int LineForInstruction(std::string_view table, LineTable format, int first_line, int unit) {
  if (unit < 0) return -1;
  switch (format) {
    case LineTable::kLineTable310:
      return Line310(table, first_line, unit);
    case LineTable::kLocationTable:
      return LocationTable(table, first_line, unit);
  }
  return -1;
}

}  // namespace ctrun::launcher
