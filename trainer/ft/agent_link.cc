#include "trainer/ft/agent_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>

#include "base/ft_wire/fields.h"

namespace ctrun::trainer::ft {
namespace {

constexpr char kLinkClosed[] = "the agent closed its socket (CTRUN_FT_SOCKET): is the agent gone?";

// A line of the agent's in a message: its first 60 bytes, quoted.
std::string LinkShown(std::string_view line) { return ft_wire::Excerpt(line, 60); }

}  // namespace

Result<std::unique_ptr<AgentLink>> AgentLink::Connect(const std::string& socket_path, AbortHandler on_abort) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("the agent's socket path '" + socket_path +
                                   "' (CTRUN_FT_SOCKET) is empty or longer than " +
                                   std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  // "@name": the abstract socket "\0name" (what ctrun's agent serves: no file to leave behind).
  if (socket_path[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path.size() +
                                                    (socket_path[0] == '@' ? 0 : 1));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(std::string("cannot create a Unix socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Unavailable("cannot connect to the agent's socket " + socket_path + " (CTRUN_FT_SOCKET): " +
                               std::strerror(err));
  }
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(std::string("cannot create an eventfd: ") + std::strerror(err));
  }
  std::unique_ptr<AgentLink> link(new AgentLink(fd, stop_fd, std::move(on_abort)));
  link->reader_ = std::thread([raw = link.get()] { raw->ReadLoop(); });
  return link;
}

AgentLink::AgentLink(int fd, int stop_fd, AbortHandler on_abort)
    : fd_(fd), stop_fd_(stop_fd), on_abort_(std::move(on_abort)) {}

AgentLink::~AgentLink() {
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  if (reader_.joinable()) reader_.join();
  ::close(fd_);
  ::close(stop_fd_);
}

Result<AgentAnswer> AgentLink::Sync(const ft_wire::SyncLine& line) { return Ask(ft_wire::FormatSync(line)); }

Result<AgentAnswer> AgentLink::Ask(const std::string& text) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failure_.ok()) return failure_;
  waiting_ = true;
  answer_.reset();
  lock.unlock();
  const Status sent = SendLine(text);
  lock.lock();
  if (!sent.ok()) {
    waiting_ = false;
    return sent;
  }
  answered_.wait(lock, [this] { return answer_.has_value() || !failure_.ok(); });
  waiting_ = false;
  if (!answer_) return failure_;
  AgentAnswer out = std::move(*answer_);
  answer_.reset();
  return out;
}

Status AgentLink::Healed(int local_rank, int64_t step, const std::string& source, uint64_t bytes, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
  }
  return SendLine(ft_wire::FormatHealed(ft_wire::HealedLine{local_rank, step, source, bytes, seconds}));
}

Status AgentLink::Done(int local_rank, int64_t step) {
  return Ask(ft_wire::FormatDone(ft_wire::DoneLine{local_rank, step})).status();
}

Status AgentLink::SendLine(const std::string& text) {
  std::size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd_, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      const std::string why = err == EPIPE || err == ECONNRESET
                                  ? std::string(kLinkClosed)
                                  : std::string("cannot write to the agent's socket: ") + std::strerror(err);
      const Status failure = Status::Unavailable(why);
      Break(failure);
      std::lock_guard<std::mutex> lock(mu_);
      return failure_;
    }
    sent += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

void AgentLink::Break(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return;
    failure_ = status;
  }
  answered_.notify_all();
  if (status.code() == Status::Code::kInvalidArgument) ::shutdown(fd_, SHUT_RDWR);
}

void AgentLink::ReadLoop() {
  std::string pending;
  for (;;) {
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {fd_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      return Break(Status::IOError(std::string("poll on the agent's socket failed: ") + std::strerror(errno)));
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents == 0) continue;
    const Status read = ReadSome(pending);
    if (!read.ok()) return Break(read);
  }
}

// Reads what is there and handles every complete line in `pending`.
Status AgentLink::ReadSome(std::string& pending) {
  char buffer[ft_wire::kMaxLineBytes];
  const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::Ok();
  if (n < 0 && errno == ECONNRESET) return Status::Unavailable(kLinkClosed);
  if (n < 0) return Status::Unavailable(std::string("cannot read the agent's socket: ") + std::strerror(errno));
  if (n == 0) return Status::Unavailable(kLinkClosed);
  pending.append(buffer, static_cast<std::size_t>(n));
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = pending.find('\n', start);
    if (end == std::string::npos) break;
    if (end - start + 1 > ft_wire::kMaxLineBytes) break;
    CTRUN_RETURN_IF_ERROR(HandleLine(std::string_view(pending).substr(start, end - start)));
    start = end + 1;
  }
  pending.erase(0, start);
  // Without its '\n', ft_wire::kMaxLineBytes bytes are already too many.
  const std::size_t line_end = pending.find('\n');
  if ((line_end == std::string::npos ? pending.size() + 1 : line_end + 1) > ft_wire::kMaxLineBytes) {
    return Status::InvalidArgument("the agent sent a line longer than " + std::to_string(ft_wire::kMaxLineBytes) +
                                   " bytes: " + LinkShown(pending));
  }
  return Status::Ok();
}

Status AgentLink::HandleLine(std::string_view line) {
  if (ft_wire::VerbIs(line, "abort")) {
    if (on_abort_) on_abort_(ft_wire::TextAfterVerb(line, "abort"));
    return Status::Ok();
  }
  if (ft_wire::VerbIs(line, "error")) {
    return Status::FailedPrecondition("the agent refused this worker's line: " +
                                      ft_wire::TextAfterVerb(line, "error"));
  }
  AgentAnswer parsed;
  if (ft_wire::VerbIs(line, "finished")) {
    parsed.finished_step = ft_wire::ParseFinished(line);
    if (!parsed.finished_step) {
      return Status::InvalidArgument("the agent's answer does not parse: " + LinkShown(line));
    }
  } else if (!ft_wire::VerbIs(line, "bye")) {  // `bye` answers `done`: an empty answer
    if (!ft_wire::VerbIs(line, "quorum")) {
      return Status::InvalidArgument("the agent sent a line this worker does not understand: " + LinkShown(line));
    }
    Result<ft_wire::QuorumLine> quorum = ft_wire::ParseQuorum(line);
    if (!quorum.ok()) return Status::InvalidArgument("the agent's answer does not parse: " + quorum.status().message());
    parsed.quorum = std::move(*quorum);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waiting_ || answer_) {
      return Status::InvalidArgument("the agent sent an answer while no sync waited for one: " + LinkShown(line));
    }
    answer_ = std::move(parsed);
  }
  answered_.notify_all();
  return Status::Ok();
}

}  // namespace ctrun::trainer::ft
