#include "launcher/report/report.h"

#include <algorithm>
#include <ctime>

namespace ctrun::launcher {
namespace {

constexpr char kNotAvailable[] = "<N/A>";
constexpr char kTracebackHint[] =
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";
constexpr size_t kMaxWidth = 60;

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos;
       pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// datetime.fromtimestamp(ts).isoformat(sep="_") for whole seconds.
std::string FormatTime(int64_t epoch_s, ReportTimeZone tz) {
  std::time_t t = static_cast<std::time_t>(epoch_s);
  std::tm parts{};
  if (tz == ReportTimeZone::kUtc) {
    gmtime_r(&t, &parts);
  } else {
    localtime_r(&t, &parts);
  }
  char buf[64];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", &parts);
  return std::string(buf, n);
}

std::string FormatEntry(size_t idx, const std::string& host, const WorkerFailure& f,
                        ReportTimeZone tz) {
  std::string msg = FailureMessage(f);
  if (f.error && f.error->form == ErrorFileForm::kStructured) {
    msg = ReplaceAll(std::move(msg), "\n", "\n  ");
  }
  const bool have_file = f.error.has_value() && !f.error_file.empty();
  return "[" + std::to_string(idx) + "]:\n" +
         "  time      : " + FormatTime(FailureTimestamp(f), tz) + "\n" +
         "  host      : " + host + "\n" +
         "  rank      : " + std::to_string(f.rank) +
         " (local_rank: " + std::to_string(f.local_rank) + ")\n" +
         "  exitcode  : " + std::to_string(f.exit_code) + " (pid: " + std::to_string(f.pid) +
         ")\n" +
         (f.binding.empty() ? std::string() : "  binding   : " + f.binding + "\n") +
         (f.stacks.empty() ? std::string() : "  stacks    : " + f.stacks + "\n") +
         "  error_file: " + (have_file ? f.error_file : std::string(kNotAvailable)) + "\n" +
         "  traceback : " + msg;
}

// Python's len(): UTF-8 code points, not bytes (continuation bytes skipped).
size_t WidestLine(const std::string& text) {
  size_t widest = 0;
  size_t len = 0;
  for (unsigned char c : text) {
    if (c == '\n') {
      len = 0;
    } else if ((c & 0xC0) != 0x80) {
      widest = std::max(widest, ++len);
    }
  }
  return widest;
}

}  // namespace

int64_t FailureTimestamp(const WorkerFailure& failure) {
  if (failure.error && failure.error->timestamp) return *failure.error->timestamp;
  return failure.observed_at_s;
}

size_t ChooseRootCause(const std::vector<WorkerFailure>& failures) {
  size_t best = 0;
  for (size_t i = 1; i < failures.size(); ++i) {
    if (FailureTimestamp(failures[i]) < FailureTimestamp(failures[best])) best = i;
  }
  return best;
}

std::string SignalName(int signum) {
  static const char* const kNames[] = {
      nullptr,     "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",    "SIGTRAP",
      "SIGABRT",   "SIGBUS",  "SIGFPE",    "SIGKILL", "SIGUSR1",   "SIGSEGV",
      "SIGUSR2",   "SIGPIPE", "SIGALRM",   "SIGTERM", "SIGSTKFLT", "SIGCHLD",
      "SIGCONT",   "SIGSTOP", "SIGTSTP",   "SIGTTIN", "SIGTTOU",   "SIGURG",
      "SIGXCPU",   "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH",  "SIGIO",
      "SIGPWR",    "SIGSYS"};
  constexpr int kRtMin = 34;
  constexpr int kRtMax = 64;
  if (signum >= 1 && signum <= 31) return kNames[signum];
  if (signum == kRtMin) return "SIGRTMIN";
  if (signum == kRtMax) return "SIGRTMAX";
  if (signum > kRtMin && signum < kRtMax) return "SIGRTMIN+" + std::to_string(signum - kRtMin);
  return "SIG" + std::to_string(signum);
}

std::string FailureMessage(const WorkerFailure& failure) {
  if (failure.error) {
    const ErrorFileData& e = *failure.error;
    if (e.form == ErrorFileForm::kStructured) {
      if (!e.traceback.empty()) return e.traceback;
      return e.message.empty() ? kNotAvailable : e.message;
    }
    if (!e.message.empty()) return e.message;
  }
  if (failure.exit_code < 0) {
    return "Signal " + std::to_string(-failure.exit_code) + " (" +
           SignalName(-failure.exit_code) + ") received by PID " + std::to_string(failure.pid);
  }
  return kTracebackHint;
}

ErrorFileData RootCauseErrorData(const WorkerFailure& failure) {
  if (failure.error) return *failure.error;
  ErrorFileData data;
  data.message = FailureMessage(failure);
  data.timestamp = failure.observed_at_s;
  return data;
}

std::string EntrypointName(const std::string& entrypoint,
                           const std::vector<std::string>& args,
                           const std::string& python_exec) {
  if (entrypoint != python_exec) return entrypoint;
  for (const std::string& arg : args) {
    if (arg.empty() || arg[0] != '-') return arg;
  }
  return "";
}

std::string FormatFailureReport(const std::string& name, const std::string& host,
                                const std::vector<WorkerFailure>& failures,
                                size_t root_cause, ReportTimeZone tz) {
  const std::string title = name + " FAILED";
  size_t width = WidestLine(title);
  std::string root_entry;
  std::string others;
  for (size_t i = 0; i < failures.size(); ++i) {
    std::string entry = FormatEntry(i, host, failures[i], tz);
    width = std::max(width, WidestLine(entry));
    if (i == root_cause) {
      root_entry = std::move(entry);
    } else {
      if (!others.empty()) others += "\n";
      others += entry;
    }
  }
  if (others.empty()) others = "  <NO_OTHER_FAILURES>";
  width = std::min(width, kMaxWidth);
  const std::string border(width, '=');
  const std::string section(width, '-');
  return "\n" + border + "\n" + title + "\n" + section + "\nFailures:\n" + others + "\n" +
         section + "\nRoot Cause (first observed failure):\n" + root_entry + "\n" + border;
}

}  // namespace ctrun::launcher
