#include "launcher/logs/filtered_log.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "launcher/logs/stream_tee.h"

namespace ctrun::launcher {

bool LineMatchesAny(std::string_view line, const std::vector<std::string>& needles) {
  for (const std::string& needle : needles) {
    if (line.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

Result<std::unique_ptr<FilteredLog>> FilteredLog::Open(const std::string& path,
                                                       std::vector<std::string> needles) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError("cannot create " + path + ": " + strerror(errno) +
                           " (check that --log-dir is writable)");
  }
  return std::unique_ptr<FilteredLog>(new FilteredLog(fd, std::move(needles)));
}

FilteredLog::~FilteredLog() { ::close(fd_); }

void FilteredLog::WriteMatching(std::string_view lines, size_t prefix_size) {
  out_.clear();
  while (!lines.empty()) {
    size_t nl = lines.find('\n');
    std::string_view line = lines.substr(0, nl == std::string_view::npos ? lines.size() : nl + 1);
    lines.remove_prefix(line.size());
    // torch tests the line as read, its '\n' included, without the prefix.
    if (LineMatchesAny(line.substr(std::min(prefix_size, line.size())), needles_)) out_.append(line);
  }
  WriteAll(fd_, out_);
}

}  // namespace ctrun::launcher
