#include "launcher/agent/attempt.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "launcher/health/output_tail.h"
#include "rendezvous/machine/failure_record.h"

namespace ctrun::launcher {
namespace {

// A worker's last stderr lines kept for its failure report: a traceback's
// end (the exception's line is the last), from its last bytes.
constexpr size_t kStderrTailLines = 8;
constexpr size_t kStderrTailBytes = kStderrTailLines * rdzv::kMaxFailureText;

// Appends `bytes` to `tail`, keeping at least its last kStderrTailBytes
// (trimmed once it holds twice that: a copy per read, amortised).
void KeepLastBytes(std::string& tail, std::string_view bytes) {
  if (bytes.size() >= kStderrTailBytes) {
    tail.assign(bytes.substr(bytes.size() - kStderrTailBytes));
    return;
  }
  tail.append(bytes);
  if (tail.size() > 2 * kStderrTailBytes) tail.erase(0, tail.size() - kStderrTailBytes);
}

// The filtered log at `path`, or null when `filters` is empty or the file
// cannot be made (a warning; the job goes on).
std::unique_ptr<FilteredLog> OpenFilteredLog(const std::vector<std::string>& filters, const std::string& path) {
  if (filters.empty()) return nullptr;
  Result<std::unique_ptr<FilteredLog>> log = FilteredLog::Open(path, filters);
  if (!log.ok()) {
    spdlog::warn("{}", log.status().message());
    return nullptr;
  }
  return std::move(*log);
}

}  // namespace

void AttemptTees::Start(boost::asio::io_context& io, const TeePlan& plan,
                        const std::vector<std::pair<int, int>>& pipes, std::function<void()> on_eof) {
  filtered_stdout_ = OpenFilteredLog(plan.stdout_filters, plan.filtered_stdout_file);
  filtered_stderr_ = OpenFilteredLog(plan.stderr_filters, plan.filtered_stderr_file);
  shipper_ = plan.shipper;
  if (plan.dedup_logs) {
    LineDedup::Limits limits;
    if (plan.dedup_window) limits.window = *plan.dedup_window;
    dedup_stdout_ = std::make_unique<ConsoleDedup>(io, STDOUT_FILENO, limits);
    dedup_stderr_ = std::make_unique<ConsoleDedup>(io, STDERR_FILENO, limits);
  }
  for (const TeeStream& s : plan.streams) {
    if (s.worker >= pipes.size()) continue;
    const int fd = s.is_stderr ? pipes[s.worker].second : pipes[s.worker].first;
    StartTee(io, s, fd, s.is_stderr ? filtered_stderr_.get() : filtered_stdout_.get(), on_eof);
  }
}

void AttemptTees::StartTee(boost::asio::io_context& io, const TeeStream& s, int pipe_fd, FilteredLog* filtered,
                           const std::function<void()>& on_eof) {
  if (pipe_fd < 0) return;
  int file_fd = -1;
  if (!s.file.empty()) {
    file_fd = ::open(s.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file_fd < 0) spdlog::warn("cannot open log file {}: {}", s.file, strerror(errno));
  }
  const int console_fd = s.is_stderr ? STDERR_FILENO : STDOUT_FILENO;
  TeeOptions options;
  options.prefix_console = s.prefix_console;
  options.filtered = filtered;
  options.dedup = s.is_stderr ? dedup_stderr_.get() : dedup_stdout_.get();
  options.local_rank = s.local_rank;
  options.shipper = shipper_;
  options.rank = s.rank;
  options.is_stderr = s.is_stderr;
  if (s.is_stderr) {
    if (stderr_tails_.size() <= s.worker) stderr_tails_.resize(s.worker + 1);
    stderr_tails_[s.worker] = std::make_unique<std::string>();
    options.on_bytes = [tail = stderr_tails_[s.worker].get()](std::string_view bytes) { KeepLastBytes(*tail, bytes); };
  }
  ++open_;
  tees_.push_back(std::make_unique<StreamTee>(io, pipe_fd, file_fd, s.to_console ? console_fd : -1, s.prefix,
                                              [this, on_eof] {
                                                if (--open_ == 0) FlushDedup();
                                                on_eof();
                                              },
                                              options));
}

std::vector<std::string> AttemptTees::StderrTail(size_t worker) const {
  if (worker >= stderr_tails_.size() || !stderr_tails_[worker]) return {};
  OutputTail lines(kStderrTailLines, rdzv::kMaxFailureText);
  lines.Append(*stderr_tails_[worker]);
  return lines.Lines();
}

void AttemptTees::FlushDedup() {
  if (dedup_stdout_) dedup_stdout_->FlushAll();
  if (dedup_stderr_) dedup_stderr_->FlushAll();
}

void AttemptTees::DrainAll() {
  for (auto& tee : tees_) tee->DrainAndFinish();
}

}  // namespace ctrun::launcher
