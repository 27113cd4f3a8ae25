#include "launcher/report/failure_report.h"

#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "base/utf8.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/forensics/stack_text.h"
#include "launcher/report/error_file.h"

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
    f.stacks_frame = InnermostFrame(text.str());
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

namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

std::string_view FirstTextLine(std::string_view text) {
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (std::string_view line = TrimBlanks(text.substr(start, end - start)); !line.empty()) return line;
    start = end + 1;
  }
  return {};
}

std::string_view LastTextLine(std::string_view text) {
  while (!text.empty()) {
    size_t start = text.rfind('\n');
    std::string_view line = TrimBlanks(start == std::string_view::npos ? text : text.substr(start + 1));
    if (!line.empty()) return line;
    if (start == std::string_view::npos) break;
    text = text.substr(0, start);
  }
  return {};
}

// "ValueError: bad", "KeyboardInterrupt", "torch.distributed.DistBackendError: x":
// a dotted name ending in Error, Exception, Exit or Interrupt, then ':' or
// the line's end.
bool IsExceptionLine(std::string_view line) {
  size_t name_end = 0;
  while (name_end < line.size() && (std::isalnum(static_cast<unsigned char>(line[name_end])) ||
                                    line[name_end] == '_' || line[name_end] == '.')) {
    ++name_end;
  }
  if (name_end == 0 || std::isdigit(static_cast<unsigned char>(line[0]))) return false;
  if (name_end < line.size() && line[name_end] != ':') return false;
  const std::string_view name = line.substr(0, name_end);
  for (std::string_view end : {"Error", "Exception", "Exit", "Interrupt"}) {
    if (name.size() >= end.size() && name.substr(name.size() - end.size()) == end) return true;
  }
  return false;
}

std::optional<double> ErrorFileMtime(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
}

}  // namespace

rdzv::WorkerFailureInfo FailureInfoOf(const WorkerFailure& f, const FailureContext& context,
                                      std::optional<double> error_file_mtime) {
  rdzv::WorkerFailureInfo info;
  info.rank = f.rank;
  info.local_rank = f.local_rank;
  info.exit_code = f.exit_code > 0 ? f.exit_code : 0;
  info.signal = f.exit_code < 0 ? -f.exit_code : 0;
  info.pid = f.pid;
  info.stopped_by_agent = context.stopped_by_agent;
  info.stacks_file = CutUtf8(f.stacks, rdzv::kMaxFailurePath);
  info.hang_frame = CutUtf8(f.stacks_frame, rdzv::kMaxFailureText);
  info.oom_kills_before = context.oom_kills_before.value_or(-1);
  info.oom_kills_after = context.oom_kills_after.value_or(-1);
  info.runtime_s = std::isfinite(context.runtime_s) && context.runtime_s >= 0 ? context.runtime_s : -1;
  info.max_rss_kib = std::max<int64_t>(context.max_rss_kib, 0);
  info.hung = context.hung;
  if (f.error) {
    info.error_file = CutUtf8(f.error_file, rdzv::kMaxFailurePath);
    info.error_message = CutUtf8(FirstTextLine(f.error->message), rdzv::kMaxFailureText);
    info.last_line = CutUtf8(LastTextLine(f.error->traceback), rdzv::kMaxFailureText);
  } else if (!context.stderr_tail.empty()) {
    for (auto line = context.stderr_tail.rbegin(); line != context.stderr_tail.rend(); ++line) {
      const std::string_view text = TrimBlanks(*line);
      if (info.last_line.empty() && !text.empty()) info.last_line = CutUtf8(text, rdzv::kMaxFailureText);
      if (IsExceptionLine(text)) {
        info.error_message = CutUtf8(text, rdzv::kMaxFailureText);
        break;
      }
    }
    info.from_stderr = !info.last_line.empty();
  }
  const double stamp = static_cast<double>(FailureTimestamp(f));
  if (f.error && f.error->timestamp) {
    info.failed_at_unix_s = error_file_mtime && std::fabs(*error_file_mtime - stamp) < 2 ? *error_file_mtime : stamp;
  } else {
    info.failed_at_unix_s = context.seen_at_unix_s > 0 ? context.seen_at_unix_s : stamp;
  }
  if (!std::isfinite(info.failed_at_unix_s) || info.failed_at_unix_s < 0) info.failed_at_unix_s = 0;
  return info;
}

RendezvousHandler::FailureReport FailureReportOf(int round, const std::string& host,
                                                 const std::vector<WorkerFailure>& failures,
                                                 const std::vector<FailureContext>& contexts) {
  RendezvousHandler::FailureReport report;
  report.round = round;
  report.host = CutUtf8(host, rdzv::kMaxFailureHost);
  for (size_t i = 0; i < failures.size(); ++i) {
    const WorkerFailure& f = failures[i];
    report.failures.push_back(FailureInfoOf(f, i < contexts.size() ? contexts[i] : FailureContext{},
                                            f.error ? ErrorFileMtime(f.error_file) : std::nullopt));
  }
  return report;
}

std::optional<rdzv::VerdictSummary> LocalVerdict(const RendezvousHandler::FailureReport& report) {
  std::vector<rdzv::ReportedFailure> failures;
  for (const rdzv::WorkerFailureInfo& f : report.failures) {
    failures.push_back(rdzv::ReportedFailure{rdzv::NodeId{report.host, 0, 0}, report.host,
                                             static_cast<uint64_t>(std::max(report.round, 0)), f, 0});
  }
  return rdzv::SummarizeFailures(failures);
}

RendezvousHandler::FailureReport ExecFailureReport(int round, const std::string& host,
                                                   const std::vector<int>& ranks, const std::string& error,
                                                   double now_unix_s) {
  RendezvousHandler::FailureReport report;
  report.round = round;
  report.host = CutUtf8(host, rdzv::kMaxFailureHost);
  for (size_t i = 0; i < ranks.size(); ++i) {
    rdzv::WorkerFailureInfo f;
    f.rank = ranks[i];
    f.local_rank = static_cast<int>(i);
    f.exit_code = 127;
    f.exec_failed = true;
    f.runtime_s = 0;
    f.error_message = CutUtf8(error, rdzv::kMaxFailureText);
    f.failed_at_unix_s = now_unix_s;
    report.failures.push_back(std::move(f));
  }
  return report;
}

int RootCauseExitCode(const WorkerFailure& f) {
  return f.exit_code > 0 ? f.exit_code : kExitSignalBase - f.exit_code;
}

FailureOutcome DecideFailure(const std::vector<WorkerFailure>& failures, const std::string& name,
                             const std::string& host, bool exit_code_from_root_cause,
                             std::optional<int> forced_code) {
  FailureOutcome out;
  out.exit_code = forced_code.value_or(FailureExitCode(failures, exit_code_from_root_cause));
  if (!failures.empty()) {
    out.root = ChooseRootCause(failures);
    out.report = FormatFailureReport(name, host, failures, *out.root);
  }
  return out;
}

int FailureExitCode(const std::vector<WorkerFailure>& failures, bool exit_code_from_root_cause) {
  if (failures.empty() || !exit_code_from_root_cause) return kExitFailure;
  return RootCauseExitCode(failures[ChooseRootCause(failures)]);
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
