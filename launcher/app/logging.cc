#include "launcher/app/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <string>

namespace ctrun::launcher {

Status SetUpLogging(const Environment& env) {
  auto logger = spdlog::stderr_logger_st("ctrun");
  logger->set_pattern("[ctrun] %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::level::level_enum level = spdlog::level::info;
  if (auto it = env.find("LOGLEVEL"); it != env.end() && !it->second.empty()) {
    std::string v = it->second;
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (v == "debug" || v == "notset") level = spdlog::level::debug;
    else if (v == "info") level = spdlog::level::info;
    else if (v == "warning" || v == "warn") level = spdlog::level::warn;
    else if (v == "error") level = spdlog::level::err;
    else if (v == "critical" || v == "fatal") level = spdlog::level::critical;
    else
      return Status::InvalidArgument("LOGLEVEL='" + it->second +
                                     "' is not a log level: set it to DEBUG, INFO, WARNING, ERROR or CRITICAL, or unset it");
  }
  logger->set_level(level);
  return Status::Ok();
}

}  // namespace ctrun::launcher
