#include "launcher/health/health_check.h"

namespace ctrun::launcher {

std::string FormatHealthReport(const std::string& command, const HealthResult& result) {
  std::string out = "health check '" + command + "' " + (result.healthy ? "passed" : result.failure);
  for (const std::string& line : result.last_lines) out += "\n  " + line;
  return out;
}

}  // namespace ctrun::launcher
