#include "launcher/process/worker_env.h"

#include <algorithm>
#include <string>

namespace ctrun::launcher {
namespace {

std::string InheritedOr(const Environment& base, const std::string& name,
                        const std::string& fallback) {
  auto it = base.find(name);
  return it == base.end() ? fallback : it->second;
}

std::string Join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace

Environment BuildWorkerEnv(const Environment& base, const WorkerRanks& ranks,
                           const RoundEnv& round, const std::string& error_file,
                           const std::string& heartbeat_file) {
  Environment env = WorkerEnvOverrides(base, ranks, round, error_file, heartbeat_file);
  env.insert(base.begin(), base.end());  // keeps the overrides where both name a variable
  return env;
}

Environment WorkerEnvOverrides(const Environment& base, const WorkerRanks& ranks,
                               const RoundEnv& round, const std::string& error_file,
                               const std::string& heartbeat_file) {
  Environment env;
  env["LOCAL_RANK"] = std::to_string(ranks.local_rank);
  env["RANK"] = std::to_string(ranks.rank);
  env["GROUP_RANK"] = std::to_string(ranks.group_rank);
  env["ROLE_RANK"] = std::to_string(ranks.role_rank);
  env["ROLE_NAME"] = round.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(ranks.local_world_size);
  env["WORLD_SIZE"] = std::to_string(ranks.world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(ranks.group_world_size);
  env["ROLE_WORLD_SIZE"] = std::to_string(ranks.role_world_size);
  env["MASTER_ADDR"] = round.master_addr;
  env["MASTER_PORT"] = std::to_string(round.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(round.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(round.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = round.run_id;
  // Python's str(bool).
  env["TORCHELASTIC_USE_AGENT_STORE"] = round.use_agent_store ? "True" : "False";
  // torch 2.x's spelling only, as its torchrun: torch 2.x warns on every rank
  // when it finds the bare NCCL_ASYNC_ERROR_HANDLING (torch 1.x's), which
  // therefore passes through only where the user set it.
  env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] =
      InheritedOr(base, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  env["TORCHELASTIC_SIGNALS_TO_HANDLE"] = Join(round.signals_to_handle_names, ',');
  env["TORCHELASTIC_ERROR_FILE"] = error_file;
  if (!heartbeat_file.empty()) env["CTRUN_HEARTBEAT_FILE"] = heartbeat_file;
  if (!round.exclude_node_file.empty()) env["CTRUN_EXCLUDE_NODE_FILE"] = round.exclude_node_file;
  if (round.virtual_local_rank) {
    env["LOCAL_RANK"] = "0";
    if (std::optional<std::string> device = VirtualDevice(base, ranks.local_rank)) {
      env["CUDA_VISIBLE_DEVICES"] = *device;
    }
  }
  return env;
}

std::optional<std::string> VirtualDevice(const Environment& base, int local_rank) {
  auto it = base.find("CUDA_VISIBLE_DEVICES");
  if (it == base.end()) return std::to_string(local_rank);
  // Python's str.split(",") then strip(): every entry counts, empty ones too.
  const std::string& list = it->second;
  size_t start = 0;
  for (int i = 0; i < local_rank; ++i) {
    start = list.find(',', start);
    if (start == std::string::npos) return std::nullopt;
    ++start;
  }
  size_t end = list.find(',', start);
  std::string entry = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
  const char* kSpace = " \t\n\r\f\v";
  size_t first = entry.find_first_not_of(kSpace);
  if (first == std::string::npos) return std::string();
  return entry.substr(first, entry.find_last_not_of(kSpace) - first + 1);
}

std::string CheckVirtualLocalRank(const Environment& base, int nproc) {
  if (nproc <= 0 || VirtualDevice(base, nproc - 1)) return "";
  const std::string& list = base.at("CUDA_VISIBLE_DEVICES");
  const size_t entries = static_cast<size_t>(std::count(list.begin(), list.end(), ',')) + 1;
  return "--virtual-local-rank: CUDA_VISIBLE_DEVICES='" + list + "' lists " + std::to_string(entries) +
         " device(s) for " + std::to_string(nproc) +
         " workers (list one device per worker, lower --nproc-per-node, or unset CUDA_VISIBLE_DEVICES)";
}

std::vector<WorkerRanks> AssignRanks(int group_rank,
                                     const std::vector<int>& local_world_sizes) {
  const int group_world_size = static_cast<int>(local_world_sizes.size());
  if (group_rank < 0 || group_rank >= group_world_size) return {};
  int world_size = 0;
  int base = 0;
  for (int g = 0; g < group_world_size; ++g) {
    if (local_world_sizes[g] < 0) return {};
    if (g < group_rank) base += local_world_sizes[g];
    world_size += local_world_sizes[g];
  }
  const int local_world_size = local_world_sizes[group_rank];
  std::vector<WorkerRanks> out;
  out.reserve(local_world_size);
  for (int local_rank = 0; local_rank < local_world_size; ++local_rank) {
    WorkerRanks r;
    r.local_rank = local_rank;
    r.rank = base + local_rank;
    r.group_rank = group_rank;
    r.group_world_size = group_world_size;
    r.role_rank = r.rank;
    r.role_world_size = world_size;
    r.local_world_size = local_world_size;
    r.world_size = world_size;
    out.push_back(r);
  }
  return out;
}

std::optional<std::string> OmpNumThreadsWarning(const Environment& env,
                                                int nproc_per_node) {
  if (env.count("OMP_NUM_THREADS") != 0 || nproc_per_node <= 1) return std::nullopt;
  // torch/distributed/run.py, config_from_args, verbatim (trailing space included).
  static constexpr char kStars[] = "*****************************************";
  return std::string("\n") + kStars +
         "\nSetting OMP_NUM_THREADS environment variable for each process to be 1 in "
         "default, to avoid your system being overloaded, please further tune the "
         "variable for optimal performance in your application as needed. \n" +
         kStars;
}

std::vector<std::string> ToEnvStrings(const Environment& env) { return ToEnvStrings(env, {}); }

std::vector<std::string> ToEnvStrings(const Environment& base, const Environment& overrides) {
  std::vector<std::string> out;
  out.reserve(base.size() + overrides.size());
  auto add = [&out](const std::string& name, const std::string& value) {
    std::string& line = out.emplace_back();
    line.reserve(name.size() + 1 + value.size());
    line.append(name).append(1, '=').append(value);
  };
  auto b = base.begin();
  for (const auto& [name, value] : overrides) {
    for (; b != base.end() && b->first < name; ++b) add(b->first, b->second);
    if (b != base.end() && b->first == name) ++b;  // overridden
    add(name, value);
  }
  for (; b != base.end(); ++b) add(b->first, b->second);
  return out;
}

}  // namespace ctrun::launcher
