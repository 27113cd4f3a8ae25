// The line of an instruction from a code object's line table: the 3.11+
// location table (a function's table and lines as CPython 3.11 itself gives
// them: co_linetable and co_lines(), with a range that has no line) and the
// 3.10 table (PEP 626 pairs, built by hand).
#include "launcher/forensics/python_linetable.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace ctrun::launcher {
namespace {

TEST_CASE("the 3.11 location table gives CPython's own line for every instruction") {
  // co_linetable of a function at line 2 with a comprehension, a try block
  // and a return over two lines (made by tests' python3.11: code.co_lines()).
  const std::string table(
    "\x80\x00\xf0\x02\x01\x09\x1c\xf0\x00\x01\x09\x1c\xdd\x12\x17\x98\x01\x91\x28\x94\x28\xf0\x03\x01\x09\x1c\xf1\x00\x01\x09\x1c\xf4\x00\x01\x09\x1c\x80\x41\xf0\x04\x03\x05\x0e\xd8\x0c\x0d\x90\x01\x89\x45\x88\x01\x88\x01\xf8\xdd\x0b\x1c\xf0\x00\x01\x05\x0e\xf0\x00\x01\x05\x0e\xf0\x00\x01\x05\x0e\xd8\x0c\x0d\x88\x01\x88\x01\x88\x01\xf0\x03\x01\x05\x0e\xf8\xf8\xf8\xf0\x0a\x00\x0d\x0e\xd8\x0c\x0d\xf0\x03\x01\x0c\x0f\xf0\x00\x01\x05\x0f", 108);
  const std::vector<int> lines = {2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 3, 3, 5, 6, 6, 6, 6, 6, 6, -1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 7, -1, -1, -1, 12, 13, 12, 12};
  for (size_t unit = 0; unit < lines.size(); ++unit) {
    INFO("instruction " << unit);
    CHECK(LineForInstruction(table, LineTable::kLocationTable, 2, static_cast<int>(unit)) == lines[unit]);
  }
  CHECK(LineForInstruction(table, LineTable::kLocationTable, 2, static_cast<int>(lines.size())) == -1);
  CHECK(LineForInstruction(table, LineTable::kLocationTable, 2, -1) == -1);
}

TEST_CASE("a location table cut short or not at an entry gives no line, and reads nothing past its end") {
  const std::string long_form("\xf0\x03", 2);  // long form, its varints missing
  CHECK(LineForInstruction(long_form, LineTable::kLocationTable, 1, 0) == -1);
  const std::string not_an_entry("\x05\x06", 2);
  CHECK(LineForInstruction(not_an_entry, LineTable::kLocationTable, 1, 0) == -1);
  const std::string endless_varint("\xe8\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", 13);
  CHECK(LineForInstruction(endless_varint, LineTable::kLocationTable, 1, 0) == -1);
  CHECK(LineForInstruction("", LineTable::kLocationTable, 1, 0) == -1);
}

TEST_CASE("the 3.10 line table: byte ranges and line deltas, -128 for no line") {
  // From line 10: 6 bytes at +1, 4 at +1, 2 with no line, 10 at +3.
  const std::string table("\x06\x01\x04\x01\x02\x80\x0a\x03", 8);
  const std::vector<int> lines = {11, 11, 11, 12, 12, -1, 15, 15, 15, 15, 15};
  for (size_t unit = 0; unit < lines.size(); ++unit) {
    INFO("instruction " << unit);
    CHECK(LineForInstruction(table, LineTable::kLineTable310, 10, static_cast<int>(unit)) == lines[unit]);
  }
  CHECK(LineForInstruction(table, LineTable::kLineTable310, 10, 11) == -1);
  CHECK(LineForInstruction(std::string("\x06", 1), LineTable::kLineTable310, 10, 0) == -1);
}

}  // namespace
}  // namespace ctrun::launcher
