// FlagTable: the flag parsing the example apps share — a table of
// "--name" -> setter, switches without a value, "--flag value" and
// "--flag=value" spellings, one-line errors naming the flag and the fix.
//
// Plain functions, no torch, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

// Checks and stores a flag's value; InvalidArgument naming `flag` otherwise.
using FlagSetter = std::function<Status(const std::string& flag, const std::string& value)>;

FlagSetter IntFlag(int64_t* out, int64_t min);   // an integer >= min
FlagSetter RealFlag(double* out, bool positive);  // a number > 0 (or >= 0)
FlagSetter TextFlag(std::string* out);            // any text

// Parses `args` against `table` and the value-less `switches` ("--help"/"-h"
// sets *help when `help` is not null). InvalidArgument for an unknown flag
// or a missing value, or the setter's error.
Status ParseFlagTable(const std::vector<std::string>& args, const std::map<std::string, FlagSetter>& table,
                      const std::map<std::string, bool*>& switches, bool* help);

}  // namespace ctrun::trainer
