#include "trainer/apps/flag_table.h"

#include <charconv>

namespace ctrun::trainer {
namespace {

Status BadNumber(const std::string& flag, const std::string& value, const std::string& want) {
  return Status::InvalidArgument(flag + " '" + value + "': not " + want + " (e.g. " + flag +
                                 (want == "a number" ? " 0.05)" : " 10)"));
}

}  // namespace

FlagSetter IntFlag(int64_t* out, int64_t min) {
  return [out, min](const std::string& flag, const std::string& value) {
    int64_t parsed = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
      return BadNumber(flag, value, "an integer");
    }
    if (parsed < min) {
      return Status::InvalidArgument(flag + " " + value + ": must be at least " + std::to_string(min));
    }
    *out = parsed;
    return Status::Ok();
  };
}

FlagSetter RealFlag(double* out, bool positive) {
  return [out, positive](const std::string& flag, const std::string& value) {
    size_t used = 0;
    double parsed = 0;
    try {
      parsed = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size()) return BadNumber(flag, value, "a number");
    if (positive ? !(parsed > 0) : !(parsed >= 0)) {
      return Status::InvalidArgument(flag + " " + value + ": must be " + (positive ? "greater than 0" : "0 or more"));
    }
    *out = parsed;
    return Status::Ok();
  };
}

FlagSetter TextFlag(std::string* out) {
  return [out](const std::string&, const std::string& value) {
    *out = value;
    return Status::Ok();
  };
}

Status ParseFlagTable(const std::vector<std::string>& args, const std::map<std::string, FlagSetter>& table,
                      const std::map<std::string, bool*>& switches, bool* help) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (help != nullptr && (flag == "--help" || flag == "-h")) {
      *help = true;
      continue;
    }
    if (auto sw = switches.find(flag); sw != switches.end()) {
      *sw->second = true;
      continue;
    }
    std::string value;
    bool has_value = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto it = table.find(flag);
    if (it == table.end()) return Status::InvalidArgument("unknown flag '" + flag + "' (see --help)");
    if (!has_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument(flag + ": missing value (see --help)");
      value = args[++i];
    }
    CTRUN_RETURN_IF_ERROR(it->second(flag, value));
  }
  return Status::Ok();
}

}  // namespace ctrun::trainer
