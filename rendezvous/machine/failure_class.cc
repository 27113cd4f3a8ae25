#include "rendezvous/machine/failure_class.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <utility>

#include "base/text_match.h"
#include "rendezvous/machine/failure_verdict.h"

namespace ctrun::rdzv {

namespace {

constexpr std::pair<FailureClass, std::string_view> kClassNames[] = {
    {FailureClass::kUnknown, "unknown"},
    {FailureClass::kNodeLost, "node_lost"},
    {FailureClass::kUnhealthyNode, "unhealthy_node"},
    {FailureClass::kHang, "hang"},
    {FailureClass::kStragglerTimeout, "straggler_timeout"},
    {FailureClass::kStopped, "stopped"},
    {FailureClass::kBadLaunch, "bad_launch"},
    {FailureClass::kOomKilled, "oom_killed"},
    {FailureClass::kSegfault, "segfault"},
    {FailureClass::kAbort, "abort"},
    {FailureClass::kBusError, "bus_error"},
    {FailureClass::kIllegalInstruction, "illegal_instruction"},
    {FailureClass::kArithmeticError, "arithmetic_error"},
    {FailureClass::kKilledBySignal, "killed_by_signal"},
    {FailureClass::kCudaOom, "cuda_oom"},
    {FailureClass::kNcclError, "nccl_error"},
    {FailureClass::kDiskFull, "disk_full"},
    {FailureClass::kFileNotFound, "file_not_found"},
    {FailureClass::kImportError, "import_error"},
    {FailureClass::kNanOrInf, "nan_or_inf"},
    {FailureClass::kConnectionError, "connection_error"},
    {FailureClass::kPythonException, "python_exception"},
};

// The error texts of one class (lower case, found anywhere in the text),
// most specific class first.
struct TextRule {
  FailureClass cls;
  std::string_view what;  // for the verdict line
  std::vector<std::string_view> fragments;
};

const std::vector<TextRule>& TextRules() {
  static const std::vector<TextRule> rules = {
      {FailureClass::kCudaOom, "ran out of GPU memory",
       {"cuda out of memory", "outofmemoryerror", "cudaerrormemoryallocation", "cublas_status_alloc_failed"}},
      {FailureClass::kNcclError, "failed in NCCL", {"nccl"}},
      {FailureClass::kDiskFull, "ran out of disk space",
       {"no space left on device", "enospc", "[errno 28]", "disk quota exceeded"}},
      {FailureClass::kFileNotFound, "did not find a file",
       {"filenotfounderror", "no such file or directory", "[errno 2]"}},
      {FailureClass::kImportError, "could not import a module", {"modulenotfounderror", "importerror"}},
      {FailureClass::kNanOrInf, "hit a NaN or Inf", {"floatingpointerror", "non-finite", "not finite"}},
  };
  return rules;
}

bool WordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string SignalName(int sig) {
  const char* abbrev = sig > 0 && sig < 65 ? sigabbrev_np(sig) : nullptr;
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// At most 200 bytes of `text`, for a one-line verdict.
std::string Clip(std::string_view text) {
  constexpr size_t kMax = 200;
  if (text.size() <= kMax) return std::string(text);
  return std::string(text.substr(0, kMax)) + "...";
}

std::string ErrorText(const FailureEvidence& e) { return e.error_message.empty() ? e.last_line : e.error_message; }

std::optional<FailureCause> ByText(const FailureEvidence& e) {
  const std::string text = ErrorText(e);
  if (text.empty()) return std::nullopt;
  for (const TextRule& rule : TextRules()) {
    for (std::string_view fragment : rule.fragments) {
      if (ContainsFolded(text, fragment)) return FailureCause{rule.cls, std::string(rule.what) + ": " + Clip(text)};
    }
  }
  if (ContainsWordFolded(text, "nan") || ContainsWordFolded(text, "inf") || ContainsWordFolded(text, "infinity")) {
    return FailureCause{FailureClass::kNanOrInf, "hit a NaN or Inf: " + Clip(text)};
  }
  if (IsConnectionError(text)) {
    return FailureCause{FailureClass::kConnectionError, "lost a connection to a peer: " + Clip(text)};
  }
  if (!e.error_message.empty() || !ExceptionType(text).empty()) {
    return FailureCause{FailureClass::kPythonException, "raised " + Clip(text)};
  }
  return std::nullopt;
}

// ", peak RSS 23.1 GiB" when known.
std::string Rss(const FailureEvidence& e) {
  if (e.max_rss_kib <= 0) return "";
  const double kib = static_cast<double>(e.max_rss_kib);
  char text[48];
  if (kib >= 1024.0 * 1024.0) {
    std::snprintf(text, sizeof text, ", peak RSS %.1f GiB", kib / (1024.0 * 1024.0));
  } else {
    std::snprintf(text, sizeof text, ", peak RSS %.0f MiB", kib / 1024.0);
  }
  return text;
}

FailureCause BySignal(const FailureEvidence& e, int sig, const std::string& how) {
  if (sig == SIGKILL && e.oom_kills_before && e.oom_kills_after && *e.oom_kills_after > *e.oom_kills_before) {
    return {FailureClass::kOomKilled, "was killed by the kernel's OOM killer (oom_kill " +
                                          std::to_string(*e.oom_kills_before) + "->" +
                                          std::to_string(*e.oom_kills_after) + " in its cgroup" + Rss(e) + ")"};
  }
  const std::string tail = e.last_line.empty() ? "" : "; its last line: " + Clip(e.last_line);
  switch (sig) {
    case SIGSEGV: return {FailureClass::kSegfault, "crashed with a segmentation fault (" + how + ")" + tail};
    case SIGABRT: return {FailureClass::kAbort, "aborted (" + how + ")" + tail};
    case SIGBUS: return {FailureClass::kBusError, "crashed with a bus error (" + how + ")" + tail};
    case SIGILL: return {FailureClass::kIllegalInstruction, "crashed on an illegal instruction (" + how + ")" + tail};
    case SIGFPE: return {FailureClass::kArithmeticError, "crashed on an arithmetic error (" + how + ")" + tail};
    default: break;
  }
  std::string oom = "";
  if (sig == SIGKILL) {
    oom = e.oom_kills_after ? "; no OOM kill in its cgroup" : "; its cgroup's OOM count was not readable";
  }
  return {FailureClass::kKilledBySignal, "was killed by " + how + oom};
}

}  // namespace

std::string_view FailureClassName(FailureClass c) {
  for (const auto& [cls, name] : kClassNames) {
    if (cls == c) return name;
  }
  return "unknown";
}

std::optional<FailureClass> ParseFailureClass(std::string_view name) {
  for (const auto& [cls, text] : kClassNames) {
    if (text == name) return cls;
  }
  return std::nullopt;
}

std::string_view ExceptionType(std::string_view message) {
  const size_t colon = message.find(':');
  const std::string_view head = message.substr(0, colon == std::string_view::npos ? message.size() : colon);
  if (head.empty() || colon == std::string_view::npos) return {};
  // A dotted identifier whose last part names an error, an exception, a
  // warning or an interrupt (RuntimeError, torch.cuda.OutOfMemoryError,
  // KeyboardInterrupt, StopIteration).
  for (char c : head) {
    if (!WordChar(c) && c != '.') return {};
  }
  const std::string_view last = head.substr(head.rfind('.') == std::string_view::npos ? 0 : head.rfind('.') + 1);
  if (last.empty() || !std::isupper(static_cast<unsigned char>(last[0]))) return {};
  for (std::string_view suffix : {"Error", "Exception", "Interrupt", "Warning", "Exit", "Iteration"}) {
    if (last.size() >= suffix.size() && last.substr(last.size() - suffix.size()) == suffix) return head;
  }
  return {};
}

FailureCause ClassifyFailure(const FailureEvidence& e) {
  if (e.node_lost) {
    const std::string why = ErrorText(e);
    return {FailureClass::kNodeLost,
            "was lost: " + (why.empty() ? std::string("its agent went away with no exit reported") : Clip(why))};
  }
  if (e.unhealthy) {
    return {FailureClass::kUnhealthyNode,
            "failed its health check" + (e.health_reason.empty() ? "" : ": " + Clip(e.health_reason))};
  }
  if (e.hung) {
    return {FailureClass::kHang, "hung (no heartbeat or step in time)" +
                                     (e.hang_frame.empty() ? "" : ", innermost frame " + Clip(e.hang_frame))};
  }
  if (e.straggler) return {FailureClass::kStragglerTimeout, "was too slow for the step's deadline"};
  if (e.stopped_by_agent) return {FailureClass::kStopped, "was stopped by its agent"};
  if (e.exec_failed) {
    const std::string text = ErrorText(e);
    return {FailureClass::kBadLaunch, "could not be started" + (text.empty() ? "" : ": " + Clip(text))};
  }
  if (e.bad_launch) {
    const std::string text = ErrorText(e);
    return {FailureClass::kBadLaunch, "failed within " + std::to_string(static_cast<int>(kBadLaunchWindowS)) +
                                          " s of its start, as every rank did: " +
                                          (text.empty() ? "exited with code " + std::to_string(e.exit_code)
                                                        : Clip(text))};
  }
  if (e.signal > 0) return BySignal(e, e.signal, SignalName(e.signal));
  if (e.exit_code > 128 && e.exit_code < 128 + 65 && ErrorText(e).empty()) {
    const int sig = e.exit_code - 128;
    return BySignal(e, sig, "exit code " + std::to_string(e.exit_code) + ", 128 + " + SignalName(sig));
  }
  if (auto cause = ByText(e)) return *cause;
  std::string seen = "exited with code " + std::to_string(e.exit_code);
  seen += e.last_line.empty() ? "; no error file and no stderr line" : "; its last line: " + Clip(e.last_line);
  return {FailureClass::kUnknown, seen};
}

bool IsBadLaunch(const std::vector<FailureEvidence>& failures, int ranks) {
  if (ranks <= 0 || failures.size() < static_cast<size_t>(ranks)) return false;
  // One rank alone failing early says nothing of the others: it may be any
  // failure (only an exec that failed is a bad launch by itself).
  if (ranks < 2 && std::none_of(failures.begin(), failures.end(), [](const FailureEvidence& f) { return f.exec_failed; })) {
    return false;
  }
  // The one way every rank failed: its exit code and error text.
  std::optional<std::pair<int, std::string>> how;
  for (const FailureEvidence& f : failures) {
    if (f.node_lost || f.unhealthy || f.hung || f.stopped_by_agent) return false;
    if (f.exec_failed) continue;
    if (f.runtime_s < 0 || f.runtime_s > kBadLaunchWindowS || f.signal != 0 || f.exit_code == 0) return false;
    const std::pair<int, std::string> mine{f.exit_code, ErrorText(f)};
    if (how && *how != mine) return false;
    if (const std::optional<FailureCause> cause = ByText(f)) {
      if (cause->cls == FailureClass::kConnectionError || cause->cls == FailureClass::kNcclError ||
          cause->cls == FailureClass::kCudaOom) {
        return false;  // a peer, the network or a busy GPU: a restart may fix it
      }
    }
    how = mine;
  }
  return true;
}

}  // namespace ctrun::rdzv
