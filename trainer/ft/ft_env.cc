#include "trainer/ft/ft_env.h"

#include <cstdlib>

namespace ctrun::trainer::ft {

Result<FtEnv> ReadFtEnv(const EnvReader& get) {
  auto text = [&get](const char* name) {
    const char* value = get(name);
    return value == nullptr ? std::string() : std::string(value);
  };
  FtEnv env{.socket = text("CTRUN_FT_SOCKET"), .host = text("CTRUN_FT_HOST"), .group = text("CTRUN_FT_GROUP"),
            .max_replicas = 1};
  if (env.socket.empty()) return Status::InvalidArgument("--ft needs ctrun --ft-replicas");
  if (env.host.empty()) env.host = "127.0.0.1";
  if (env.group.empty()) env.group = "0";
  const std::string replicas = text("CTRUN_FT_REPLICAS");
  const size_t colon = replicas.find(':');
  char* end = nullptr;
  const long max = colon == std::string::npos ? 0 : std::strtol(replicas.c_str() + colon + 1, &end, 10);
  if (max < 1 || max > 1 << 20 || end == nullptr || *end != '\0') {
    return Status::InvalidArgument("CTRUN_FT_REPLICAS '" + replicas + "': need MIN:MAX (set by ctrun --ft-replicas)");
  }
  env.max_replicas = static_cast<int>(max);
  const std::string fixed = text("CTRUN_FT_FIXED_STALL");
  if (!fixed.empty() && fixed != "1") {
    return Status::InvalidArgument("CTRUN_FT_FIXED_STALL '" + fixed + "': set it to 1 or leave it unset");
  }
  env.fixed_stall = fixed == "1";
  const std::string exact = text("CTRUN_FT_EXACT");
  if (!exact.empty() && exact != "1") {
    return Status::InvalidArgument("CTRUN_FT_EXACT '" + exact + "': set it to 1 (ctrun --ft-exact) or leave it unset");
  }
  env.exact = exact == "1";
  return env;
}

}  // namespace ctrun::trainer::ft
