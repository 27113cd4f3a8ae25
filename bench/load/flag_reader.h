// FlagReader: the load generators' command line (rdzv_load, rdzv_load_jobs,
// store_load), read one argument at a time: "--flag value" pairs, and the
// bare words a generator takes (store_load's modes) which it checks itself.
// Every error goes to the generator's usage function, which prints the
// reason and its usage on stderr and exits 2 (PrintUsageAndExit).
//
// Borrows argv; plain values; no threads.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace bench_load {

// "<program>: <why>\n<usage>" on stderr (usage ends with its own newline),
// then exit 2.
[[noreturn]] void PrintUsageAndExit(const char* program, const std::string& why, const char* usage);

// `text` as a number >= lo (strtod, the whole text; nan is refused), else
// nullopt.
std::optional<double> ParseNumber(const std::string& text, double lo);

class FlagReader {
 public:
  using UsageFn = void (*)(const std::string& why);  // must not return

  FlagReader(int argc, char** argv, UsageFn usage) : argc_(argc), argv_(argv), usage_(usage) {}
  // Errors go to PrintUsageAndExit(program, why, usage) (both borrowed).
  FlagReader(int argc, char** argv, const char* program, const char* usage)
      : argc_(argc), argv_(argv), usage_([program, usage](const std::string& why) {
          PrintUsageAndExit(program, why, usage);
        }) {}

  // Calls on_flag(flag()) for each argument in turn: it reads the flag's
  // value (Value, Number) and returns whether it knows the flag; an unknown
  // one ends in usage("unknown flag <flag>").
  void ReadAll(const std::function<bool(const std::string& flag)>& on_flag);
  // usage(why): prints it with the usage and exits 2.
  [[noreturn]] void Fail(const std::string& why) const;

  // Moves to the next argument (flag()); false after the last.
  bool Next();
  const std::string& flag() const { return flag_; }
  // Whether an argument follows flag().
  bool HasValue() const { return i_ + 1 < argc_; }
  // The argument after flag(), consumed; without one, usage(flag() + missing).
  const std::string& Value(const char* missing = " needs a value");
  // The value Value() read last as a number >= lo, else usage("<flag>
  // '<value>': give a number >= <lo as an integer>").
  double Number(double lo) const;

 private:
  int argc_;
  char** argv_;
  std::function<void(const std::string& why)> usage_;  // never returns
  int i_ = 0;
  std::string flag_, value_;
};

}  // namespace bench_load
