// The line of a CPython instruction, from its code object's line table.
// Pure; no I/O; thread-safe.
#pragma once

#include <string_view>

#include "launcher/forensics/python_layout.h"

namespace ctrun::launcher {

// The source line of the instruction at `unit` (in 2-byte code units from
// the code's first instruction) in a code object whose first line is
// `first_line` and whose co_linetable holds `table` in `format`. -1 when the
// instruction has no line (an artificial one) or lies past the table's end,
// or the table is cut short.
int LineForInstruction(std::string_view table, LineTable format, int first_line, int unit);

}  // namespace ctrun::launcher
