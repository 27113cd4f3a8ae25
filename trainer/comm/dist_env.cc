#include "trainer/comm/dist_env.h"

#include <charconv>
#include <cstdlib>
#include <vector>

namespace ctrun::trainer {
namespace {

Result<long> ParseInt(const std::string& name, const std::string& text) {
  long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return Status::InvalidArgument(name + "='" + text +
                                   "': not an integer (the launcher sets it; "
                                   "unset it or give a whole number)");
  }
  return value;
}

Status CheckRange(const std::string& name, long value, long lo, long hi,
                  const std::string& rule) {
  if (value < lo || value > hi) {
    return Status::InvalidArgument(name + "=" + std::to_string(value) +
                                   ": out of range (" + rule + ")");
  }
  return Status::Ok();
}

}  // namespace

std::string DistEnv::StorePrefix() const {
  return "/worker/attempt_" + std::to_string(restart_count);
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Result<DistEnv> ReadDistEnv(const EnvLookup& env) {
  std::vector<std::string> missing;
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    if (!env(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name;
    return Status::FailedPrecondition(
        "environment variable(s) " + names +
        " not set: this program is a distributed worker; start it with "
        "`ctrun --nproc-per-node N <binary>` (or torchrun --no_python)");
  }

  DistEnv out;
  auto world = ParseInt("WORLD_SIZE", *env("WORLD_SIZE"));
  if (!world.ok()) return world.status();
  CTRUN_RETURN_IF_ERROR(CheckRange("WORLD_SIZE", *world, 1, 1 << 20, "WORLD_SIZE must be at least 1"));
  out.world_size = static_cast<int>(*world);

  auto rank = ParseInt("RANK", *env("RANK"));
  if (!rank.ok()) return rank.status();
  CTRUN_RETURN_IF_ERROR(CheckRange("RANK", *rank, 0, out.world_size - 1,
                                   "need 0 <= RANK < WORLD_SIZE=" + std::to_string(out.world_size)));
  out.rank = static_cast<int>(*rank);

  out.local_world_size = out.world_size;
  if (auto text = env("LOCAL_WORLD_SIZE")) {
    auto lws = ParseInt("LOCAL_WORLD_SIZE", *text);
    if (!lws.ok()) return lws.status();
    CTRUN_RETURN_IF_ERROR(CheckRange("LOCAL_WORLD_SIZE", *lws, 1, 1 << 20,
                                     "LOCAL_WORLD_SIZE must be at least 1"));
    out.local_world_size = static_cast<int>(*lws);
  }
  if (auto text = env("LOCAL_RANK")) {
    auto local = ParseInt("LOCAL_RANK", *text);
    if (!local.ok()) return local.status();
    CTRUN_RETURN_IF_ERROR(CheckRange("LOCAL_RANK", *local, 0, out.local_world_size - 1,
                                     "need 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE=" +
                                         std::to_string(out.local_world_size)));
    out.local_rank = static_cast<int>(*local);
  }

  out.master_addr = *env("MASTER_ADDR");
  if (out.master_addr.empty()) {
    return Status::InvalidArgument("MASTER_ADDR is empty: set it to the host of rank 0");
  }
  auto port = ParseInt("MASTER_PORT", *env("MASTER_PORT"));
  if (!port.ok()) return port.status();
  CTRUN_RETURN_IF_ERROR(CheckRange("MASTER_PORT", *port, 1, 65535, "need 0 < MASTER_PORT < 65536"));
  out.master_port = static_cast<int>(*port);

  if (auto text = env("TORCHELASTIC_USE_AGENT_STORE")) {
    if (*text == "True" || *text == "true" || *text == "1") {
      out.use_agent_store = true;
    } else if (*text == "False" || *text == "false" || *text == "0" || text->empty()) {
      out.use_agent_store = false;
    } else {
      return Status::InvalidArgument("TORCHELASTIC_USE_AGENT_STORE='" + *text +
                                     "': expected True or False");
    }
  }
  if (auto text = env("TORCHELASTIC_RESTART_COUNT")) {
    auto count = ParseInt("TORCHELASTIC_RESTART_COUNT", *text);
    if (!count.ok()) return count.status();
    CTRUN_RETURN_IF_ERROR(CheckRange("TORCHELASTIC_RESTART_COUNT", *count, 0, 1 << 30,
                                     "must not be negative"));
    out.restart_count = static_cast<int>(*count);
  }
  return out;
}

}  // namespace ctrun::trainer
