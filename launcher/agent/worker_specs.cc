#include "launcher/agent/worker_specs.h"

#include <chrono>

#include "launcher/cli/command.h"
#include "launcher/report/report.h"
#include "launcher/logs/stream_tee.h"

namespace ctrun::launcher {
namespace {


// Where one of a worker's streams goes: a pipe to read (tee, filters), a
// file only, the console (inherited), or nowhere when the rank is filtered
// off the console.
StdioTarget ChooseTarget(bool pipe, bool redirect, bool on_console, const std::string& path) {
  StdioTarget t;
  if (pipe) {
    t.mode = StdioTarget::Mode::kPipe;
  } else if (redirect) {
    t.mode = StdioTarget::Mode::kFile;
    t.path = path;
  } else if (!on_console) {
    t.mode = StdioTarget::Mode::kNull;
  }
  return t;
}

WorkerSpec MakeSpec(const AttemptInputs& in, const WorkerRanks& r, const RoundEnv& round_env) {
  const LaunchConfig& c = in.config;
  const int lr = r.local_rank;
  const int attempt = in.restart_count;
  WorkerSpec spec;
  spec.local_rank = lr;
  spec.argv = BuildWorkerArgv(c, lr);
  Environment overrides =
      WorkerEnvOverrides(in.env, r, round_env, in.log_dir.ErrorFile(attempt, lr),
                         c.heartbeat_timeout > Seconds(0) ? HeartbeatFile(in.log_dir, attempt, lr) : std::string());
  if (c.preempt_grace) {
    overrides["CTRUN_PREEMPT_FILE"] = PreemptNoticeFile(in.log_dir);
    overrides["CTRUN_PREEMPT_SAVED_FILE"] = PreemptSavedFile(in.log_dir, attempt, lr);
  }
  spec.env = ToEnvStrings(in.env, overrides);
  // A stream with --duplicate-*-filters is read from a pipe, tee'd or not;
  // with --dedup-logs so is every stream that reaches the console.
  const bool dedup = c.dedup_logs && OnConsole(c, lr);
  // With --share-logs every stream is read, to ship its lines.
  spec.out = ChooseTarget(c.tee.Stdout(lr) || !c.duplicate_stdout_filters.empty() ||
                              (dedup && !c.redirects.Stdout(lr)) || c.share_logs,
                          c.redirects.Stdout(lr), OnConsole(c, lr), in.log_dir.StdoutFile(attempt, lr));
  spec.err = ChooseTarget(c.tee.Stderr(lr) || !c.duplicate_stderr_filters.empty() ||
                              (dedup && !c.redirects.Stderr(lr)) || c.share_logs,
                          c.redirects.Stderr(lr), OnConsole(c, lr), in.log_dir.StderrFile(attempt, lr));
  if (const WorkerBinding* b = BindingOf(in.bindings, lr)) spec.binding = *b;
  if (c.hang_stacks_timeout > Seconds(0)) {
    spec.stacks_file = in.log_dir.StacksFile(attempt, lr);
    spec.stacks_timeout = ToDuration(c.hang_stacks_timeout);
  }
  return spec;
}

TeeStream PlanStream(size_t worker, int local_rank, bool is_stderr, bool tee, bool redirect, bool on_console,
                     const std::string& path, const std::string& prefix) {
  TeeStream s;
  s.worker = worker;
  s.local_rank = local_rank;
  s.is_stderr = is_stderr;
  if (tee || redirect) s.file = path;
  s.to_console = on_console && (tee || !redirect);
  s.prefix_console = tee;
  s.prefix = prefix;
  return s;
}

}  // namespace

std::string ExcludeNodeFile(const RunLogDir& log_dir) { return log_dir.path() + "/exclude_node"; }

std::string PreemptNoticeFile(const RunLogDir& log_dir) { return log_dir.path() + "/preempt"; }

std::string PreemptSavedFile(const RunLogDir& log_dir, int restart_count, int local_rank) {
  return log_dir.RankDir(restart_count, local_rank) + "/preempt_saved";
}

std::string HeartbeatFile(const RunLogDir& log_dir, int restart_count, int local_rank) {
  return log_dir.RankDir(restart_count, local_rank) + "/heartbeat";
}

bool OnConsole(const LaunchConfig& config, int local_rank) {
  return !config.local_ranks_filter || config.local_ranks_filter->count(local_rank) > 0;
}

const WorkerBinding* BindingOf(const std::vector<WorkerBinding>& bindings, int local_rank) {
  return local_rank >= 0 && local_rank < static_cast<int>(bindings.size()) ? &bindings[local_rank] : nullptr;
}

RoundEnv MakeRoundEnv(const AttemptInputs& in, const Round& round) {
  RoundEnv round_env;
  round_env.master_addr = round.master_addr;
  round_env.master_port = round.master_port;
  round_env.restart_count = in.restart_count;
  round_env.max_restarts = in.config.max_restarts;
  round_env.run_id = round.run_id;
  round_env.use_agent_store = round.use_agent_store;
  round_env.role = in.config.role;
  round_env.virtual_local_rank = in.config.virtual_local_rank;
  round_env.exclude_node_file = ExcludeNodeFile(in.log_dir);
  for (int sig : in.config.signals_to_handle) round_env.signals_to_handle_names.push_back(SignalName(sig));
  return round_env;
}

std::vector<WorkerSpec> MakeWorkerSpecs(const AttemptInputs& in, const Round& round,
                                        const std::vector<WorkerRanks>& ranks) {
  const RoundEnv round_env = MakeRoundEnv(in, round);
  std::vector<WorkerSpec> specs;
  for (const WorkerRanks& r : ranks) specs.push_back(MakeSpec(in, r, round_env));
  return specs;
}

TeePlan MakeTeePlan(const AttemptInputs& in, const std::vector<WorkerRanks>& ranks) {
  const LaunchConfig& c = in.config;
  const int attempt = in.restart_count;
  TeePlan plan;
  plan.stdout_filters = c.duplicate_stdout_filters;
  plan.stderr_filters = c.duplicate_stderr_filters;
  if (!plan.stdout_filters.empty()) plan.filtered_stdout_file = in.log_dir.FilteredStdoutFile(attempt);
  if (!plan.stderr_filters.empty()) plan.filtered_stderr_file = in.log_dir.FilteredStderrFile(attempt);
  plan.dedup_logs = c.dedup_logs;
  plan.dedup_window = c.dedup_window;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int lr = ranks[i].local_rank;
    const std::string prefix = ExpandLinePrefix(c.log_line_prefix_template, c.role, ranks[i].rank, lr);
    plan.streams.push_back(PlanStream(i, lr, false, c.tee.Stdout(lr), c.redirects.Stdout(lr), OnConsole(c, lr),
                                      in.log_dir.StdoutFile(attempt, lr), prefix));
    plan.streams.push_back(PlanStream(i, lr, true, c.tee.Stderr(lr), c.redirects.Stderr(lr), OnConsole(c, lr),
                                      in.log_dir.StderrFile(attempt, lr), prefix));
    plan.streams[plan.streams.size() - 2].rank = ranks[i].rank;
    plan.streams.back().rank = ranks[i].rank;
  }
  return plan;
}

}  // namespace ctrun::launcher
