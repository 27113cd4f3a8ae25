#include "launcher/logs/event_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "launcher/logs/stream_tee.h"
#include "launcher/net/local_address.h"

namespace ctrun::launcher {

Result<std::unique_ptr<EventLog>> EventLog::Open(const std::string& path, std::string run_id,
                                                 std::string node_id) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError("--events-file " + path + ": " + strerror(errno) +
                           " (give a writable path)");
  }
  return std::unique_ptr<EventLog>(new EventLog(fd, std::move(run_id), std::move(node_id)));
}

std::unique_ptr<EventLog> EventLog::ToStderr(std::string run_id, std::string node_id) {
  std::unique_ptr<EventLog> log(new EventLog(-1, std::move(run_id), std::move(node_id)));
  log->AlsoToStderr();
  return log;
}

EventLog::EventLog(int fd, std::string run_id, std::string node_id)
    : fd_(fd), run_id_(std::move(run_id)), node_(HostName()), node_id_(std::move(node_id)) {}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::Emit(std::string_view event, const nlohmann::ordered_json& fields) {
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::ordered_json line = {{"ts", now}, {"run_id", run_id_}, {"node", node_},
                                 {"node_id", node_id_}, {"event", std::string(event)}};
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  const std::string text = line.dump() + "\n";
  if (to_stderr_) WriteAll(STDERR_FILENO, text);
  if (fd_ < 0) return;
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size()) && !warned_) {
    warned_ = true;
    spdlog::warn("cannot write to the --events-file: {}", n < 0 ? strerror(errno) : "short write");
  }
}

}  // namespace ctrun::launcher
