// The load generators' command line: see flag_reader.h.
#include "flag_reader.h"

#include <cstdio>
#include <cstdlib>

namespace bench_load {

[[noreturn]] void PrintUsageAndExit(const char* program, const std::string& why, const char* usage) {
  std::fprintf(stderr, "%s: %s\n%s", program, why.c_str(), usage);
  std::exit(2);
}

std::optional<double> ParseNumber(const std::string& text, double lo) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || !(v >= lo)) return std::nullopt;  // !(>=): nan too
  return v;
}

void FlagReader::ReadAll(const std::function<bool(const std::string& flag)>& on_flag) {
  while (Next()) {
    if (!on_flag(flag_)) Fail("unknown flag " + flag_);
  }
}

void FlagReader::Fail(const std::string& why) const {
  usage_(why);
  std::abort();  // usage_ does not return
}

bool FlagReader::Next() {
  if (++i_ >= argc_) return false;
  flag_ = argv_[i_];
  return true;
}

const std::string& FlagReader::Value(const char* missing) {
  if (i_ + 1 >= argc_) usage_(flag_ + missing);
  value_ = argv_[++i_];
  return value_;
}

double FlagReader::Number(double lo) const {
  std::optional<double> v = ParseNumber(value_, lo);
  if (!v) usage_(flag_ + " '" + value_ + "': give a number >= " + std::to_string(static_cast<long>(lo)));
  return v.value_or(lo);  // usage_ does not return
}

}  // namespace bench_load
