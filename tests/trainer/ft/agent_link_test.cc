// AgentLink (trainer/ft/agent_link.h) against a real Unix socket served by
// the test: a thread plays the agent. Sync round trips, `healed`, an abort
// pushed while Sync waits, the agent closing, an `error` line, garbage, an
// unparseable answer and a line over 4096 bytes. Every wait is on a socket
// or a future, never a sleep.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "base/ft_wire/fields.h"
#include "trainer/ft/agent_link.h"

namespace ft = ctrun::trainer::ft;
using ctrun::Status;

namespace {

// The agent's side: a listening Unix socket in a fresh directory, one
// accepted connection, blocking line reads and writes.
class TestAgent {
 public:
  TestAgent() {
    char dir[] = "/tmp/ctrun-ft-link-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/agent.sock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listen_fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(listen_fd_, 4) == 0);
  }
  ~TestAgent() {
    Close();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

  void Accept() { fd_ = ::accept(listen_fd_, nullptr, nullptr); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // One line without its '\n'; "<eof>" when the worker closed or shut down.
  std::string ReadLine() {
    std::string line;
    char c = 0;
    while (::recv(fd_, &c, 1, 0) == 1) {
      if (c == '\n') return line;
      line += c;
    }
    return "<eof>";
  }
  void Write(const std::string& text) {
    std::size_t sent = 0;
    while (sent < text.size()) {
      const ssize_t n = ::send(fd_, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

 private:
  std::string dir_;
  std::string path_;
  int listen_fd_ = -1;
  int fd_ = -1;
};

std::unique_ptr<ft::AgentLink> LinkTo(TestAgent& agent, ft::AgentLink::AbortHandler on_abort = nullptr) {
  auto link = ft::AgentLink::Connect(agent.path(), std::move(on_abort));
  REQUIRE(link.ok());
  agent.Accept();
  return std::move(link).value();
}

const ctrun::ft_wire::SyncLine kSync{0, 5, 40001, 40002, ctrun::ft_wire::Ballot{3, 4, true}};
constexpr char kSyncText[] = "sync 0 5 40001 40002 3/4/1";
constexpr char kQuorum[] = "quorum 1 3 0 2 5 127.0.0.1:4000 - 1\n";

// The agent's side of one Sync that the agent answers with `reply`, then the
// result of that Sync.
ctrun::Result<ft::AgentAnswer> SyncAnswered(TestAgent& agent, ft::AgentLink& link, const std::string& reply) {
  std::thread agent_side([&] {
    CHECK(agent.ReadLine() == kSyncText);
    agent.Write(reply);
  });
  auto answer = link.Sync(kSync);
  agent_side.join();
  return answer;
}

}  // namespace

TEST_CASE("sync waits for the quorum answer; healed is one line", "[agent_link]") {
  TestAgent agent;
  auto link = LinkTo(agent);
  for (int round = 0; round < 3; ++round) {
    auto answer = SyncAnswered(agent, *link, kQuorum);
    REQUIRE(answer.ok());
    CHECK(answer->quorum.quorum_id == 3);
    CHECK(answer->quorum.replica_world == 2);
    CHECK(answer->quorum.right_host == "127.0.0.1");
    CHECK(answer->quorum.right_port == 4000);
    CHECK(answer->quorum.serve);
  }
  REQUIRE(link->Healed(0, 5, "10.0.0.2:5000", 1024, 1.5).ok());
  CHECK(agent.ReadLine() == "healed 0 5 10.0.0.2:5000 1024 1.500");
  auto done = std::async(std::launch::async, [&] { return link->Done(0, 6); });
  CHECK(agent.ReadLine() == "done 0 6");
  agent.Write("bye\n");
  CHECK(done.get().ok());
}

TEST_CASE("an abort pushed while sync waits runs on_abort and sync still gets its answer", "[agent_link]") {
  TestAgent agent;
  std::promise<std::string> aborted;
  auto link = LinkTo(agent, [&](const std::string& reason) { aborted.set_value(reason); });
  std::thread agent_side([&] {
    CHECK(agent.ReadLine() == kSyncText);  // Sync has sent its line: it waits, or is about to
    agent.Write("abort group-2 was lost\n");
    CHECK(aborted.get_future().get() == "group-2 was lost");  // handled before the answer is sent
    agent.Write(kQuorum);
  });
  auto answer = link->Sync(kSync);
  agent_side.join();
  REQUIRE(answer.ok());
  CHECK(answer->quorum.quorum_id == 3);
}

TEST_CASE("a line of exactly 4096 bytes is accepted", "[agent_link]") {
  TestAgent agent;
  std::promise<std::string> aborted;
  auto link = LinkTo(agent, [&](const std::string& reason) { aborted.set_value(reason); });
  const std::string reason(ctrun::ft_wire::kMaxLineBytes - std::strlen("abort \n"), 'r');
  agent.Write("abort " + reason + "\n");
  CHECK(aborted.get_future().get() == reason);
  CHECK(SyncAnswered(agent, *link, kQuorum).ok());
}

TEST_CASE("the agent closing fails the waiting sync and every later call", "[agent_link]") {
  TestAgent agent;
  auto link = LinkTo(agent);
  std::thread agent_side([&] {
    CHECK(agent.ReadLine() == kSyncText);
    agent.Close();
  });
  auto answer = link->Sync(kSync);
  agent_side.join();
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.status().code() == Status::Code::kUnavailable);
  CHECK_THAT(answer.status().message(), Catch::Contains("the agent closed its socket"));
  auto again = link->Sync(kSync);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == Status::Code::kUnavailable);
  CHECK(link->Healed(0, 1, "a:1", 1, 1).code() == Status::Code::kUnavailable);
}

TEST_CASE("an error line fails sync with the agent's message", "[agent_link]") {
  TestAgent agent;
  auto link = LinkTo(agent);
  auto answer = SyncAnswered(agent, *link, "error local rank 0 is in quorum 3, local rank 1 in quorum 4\n");
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.status().code() == Status::Code::kFailedPrecondition);
  CHECK_THAT(answer.status().message(), Catch::EndsWith("local rank 0 is in quorum 3, local rank 1 in quorum 4"));
  CHECK(link->Sync(kSync).status().code() == Status::Code::kFailedPrecondition);
}

TEST_CASE("garbage from the agent breaks the link and shuts the socket", "[agent_link]") {
  const std::string garbage = GENERATE(std::string("hello there\n"), std::string("\n"),
                                       std::string("quorum 1 x 0 1 0 - - 0\n"), std::string("aborted x\n"));
  TestAgent agent;
  auto link = LinkTo(agent);
  auto answer = SyncAnswered(agent, *link, garbage);
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.status().code() == Status::Code::kInvalidArgument);
  CHECK(agent.ReadLine() == "<eof>");  // the worker shut its socket down
  CHECK(link->Sync(kSync).status().code() == Status::Code::kInvalidArgument);
}

TEST_CASE("an unparseable quorum answer names its field", "[agent_link]") {
  TestAgent agent;
  auto link = LinkTo(agent);
  auto answer = SyncAnswered(agent, *link, "quorum 1 x 0 1 0 - - 0\n");
  REQUIRE_FALSE(answer.ok());
  CHECK_THAT(answer.status().message(), Catch::Contains("quorum_id 'x'"));
}

TEST_CASE("a quorum line nobody asked for breaks the link", "[agent_link]") {
  TestAgent agent;
  auto link = LinkTo(agent);
  agent.Write(kQuorum);
  CHECK(agent.ReadLine() == "<eof>");  // seen and refused by the reader thread
  auto answer = link->Sync(kSync);
  REQUIRE_FALSE(answer.ok());
  CHECK_THAT(answer.status().message(), Catch::Contains("while no sync waited"));
}

TEST_CASE("a line over 4096 bytes breaks the link", "[agent_link]") {
  const bool with_newline = GENERATE(true, false);
  TestAgent agent;
  auto link = LinkTo(agent);
  const std::string line = "abort " + std::string(ctrun::ft_wire::kMaxLineBytes, 'x') + (with_newline ? "\n" : "");
  auto answer = SyncAnswered(agent, *link, line);
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.status().code() == Status::Code::kInvalidArgument);
  CHECK_THAT(answer.status().message(), Catch::Contains("longer than 4096 bytes"));
}

TEST_CASE("connecting where no agent listens fails in one line", "[agent_link]") {
  auto missing = ft::AgentLink::Connect("/tmp/ctrun-ft-no-such-dir/agent.sock", nullptr);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kUnavailable);
  CHECK_THAT(missing.status().message(), Catch::Contains("/tmp/ctrun-ft-no-such-dir/agent.sock"));
  auto too_long = ft::AgentLink::Connect("/tmp/" + std::string(200, 'a'), nullptr);
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.status().code() == Status::Code::kInvalidArgument);
}

TEST_CASE("a sync answered finished: the run is over") {
  TestAgent agent;
  auto link = LinkTo(agent);
  auto answer = std::async(std::launch::async, [&] { return link->Sync(kSync); });
  CHECK(agent.ReadLine() == kSyncText);
  agent.Write("finished 14\n");
  auto got = answer.get();
  REQUIRE(got.ok());
  CHECK(got->finished_step == 14);
}

TEST_CASE("AgentLink connects to an abstract socket named @name, as ctrun's agent serves it") {
  const std::string name = "ctrun-ft-link-test-" + std::to_string(::getpid());
  const int listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listen_fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  REQUIRE(::listen(listen_fd, 1) == 0);
  auto link = ft::AgentLink::Connect("@" + name, nullptr);
  REQUIRE(link.ok());
  const int fd = ::accept(listen_fd, nullptr, nullptr);
  REQUIRE(fd >= 0);
  ::close(fd);
  ::close(listen_fd);
  // A name nothing listens on is Unavailable, naming it.
  auto none = ft::AgentLink::Connect("@" + name + "-none", nullptr);
  REQUIRE(none.status().IsUnavailable());
  CHECK_THAT(none.status().message(), Catch::Contains(name + "-none"));
}
