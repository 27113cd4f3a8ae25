#include "launcher/agent/failure_report.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "launcher/cli/exit_codes.h"
#include "launcher/forensics/stack_text.h"
#include "launcher/logs/error_file.h"

namespace ctrun::launcher {

WorkerFailure FailureOf(const WorkerExit& e, int rank, const WorkerBinding* binding) {
  WorkerFailure f;
  f.local_rank = e.local_rank;
  f.rank = rank;
  f.exit_code = e.exit_code;
  f.pid = e.pid;
  f.observed_at_s = e.epoch_seconds;
  if (binding) f.binding = binding->summary;
  return f;
}

std::string StacksField(const std::string& stacks_file, const std::string& stacks_text) {
  const std::string frame = InnermostFrame(stacks_text);
  return stacks_file + (frame.empty() ? "" : " (innermost frame: " + frame + ")");
}

WorkerFailure ReadWorkerFailure(const WorkerExit& e, int rank, const WorkerBinding* binding,
                                const std::string& stacks_file, const std::string& error_file) {
  WorkerFailure f = FailureOf(e, rank, binding);
  if (std::ifstream in{stacks_file}) {  // saved before it was killed for a hang
    std::ostringstream text;
    text << in.rdbuf();
    f.stacks = StacksField(stacks_file, text.str());
  }
  Result<ErrorFileData> data = ReadErrorFile(error_file);
  if (data.ok()) {
    f.error_file = error_file;
    f.error = *data;
  } else if (!data.status().IsNotFound()) {
    spdlog::warn("{}", data.status().message());
  }
  return f;
}

int RootCauseExitCode(const WorkerFailure& f) {
  return f.exit_code > 0 ? f.exit_code : kExitSignalBase - f.exit_code;
}

FailureOutcome DecideFailure(const std::vector<WorkerFailure>& failures, const std::string& name,
                             const std::string& host, bool exit_code_from_root_cause,
                             std::optional<int> forced_code) {
  FailureOutcome out;
  out.exit_code = kExitFailure;
  if (!failures.empty()) {
    out.root = ChooseRootCause(failures);
    out.report = FormatFailureReport(name, host, failures, *out.root);
    if (exit_code_from_root_cause && !forced_code) out.exit_code = RootCauseExitCode(failures[*out.root]);
  }
  if (forced_code) out.exit_code = *forced_code;
  return out;
}

std::string FormatUnhealthyBlock(const std::string& host, const std::string& report) {
  std::string block = "[ctrun] node unhealthy: " + host + "\n";
  for (size_t start = 0; start < report.size();) {
    size_t end = report.find('\n', start);
    if (end == std::string::npos) end = report.size();
    block += "  " + report.substr(start, end - start) + "\n";
    start = end + 1;
  }
  block += "  this node leaves the job (exit code " + std::to_string(kExitNodeUnhealthy) +
           "); the other nodes go on without it\n";
  return block;
}

std::string StuckReport(const std::vector<StuckProcess>& stuck) {
  std::string report = "workers outlived SIGKILL by --kill-timeout:";
  for (const StuckProcess& p : stuck) {
    report += fmt::format(" pid {} ({}{})", p.pid, p.comm.empty() ? "" : p.comm + ", ", p.state);
  }
  return report;
}

// SIGKILL did not end them: uninterruptible sleep (a hung driver, a dead
// file system) or a zombie nobody reaps. Waiting on would hang the job.
void ReportStuck(const std::vector<StuckProcess>& stuck, double kill_timeout_s, EventLog* events) {
  using Json = nlohmann::ordered_json;
  Json list = Json::array();
  for (const StuckProcess& p : stuck) {
    spdlog::error("{} of worker local_rank {} (pid {}{}) is still there {:g} s after SIGKILL: {}",
                  p.is_worker ? "the worker process" : "a descendant", p.local_rank, p.pid,
                  p.comm.empty() ? "" : ", " + p.comm, kill_timeout_s, p.state);
    list.push_back(Json{{"local_rank", p.local_rank}, {"pid", p.pid}, {"worker", p.is_worker},
                        {"comm", p.comm}, {"state", p.state}});
  }
  spdlog::error("ctrun stops waiting for them (--kill-timeout); this node looks unhealthy "
                "(check its GPUs, drivers and file systems); exit code {}",
                kExitWorkersStuck);
  if (events) {
    events->Emit("workers_stuck", Json{{"kill_timeout_s", kill_timeout_s}, {"processes", list}});
  }
}

}  // namespace ctrun::launcher
