// FtReplica against a scripted agent on a Unix socket (one group of one
// rank, so the rings have one member and need no peer): the lines it sends,
// the plans it returns, a pushed abort turning the ballot to no, a new
// quorum opening a new spare ring, and an answer it must refuse.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/trainer/catch_after_torch.h"
#include "trainer/ft/ft_replica.h"

namespace ft = ctrun::trainer::ft;

namespace {

// Accepts one connection; answers the i-th `sync` line with answers[i]
// (which may hold several lines, e.g. an `abort` first) and records every
// line. Its thread uses no Catch2 macro (they are not thread-safe).
class ScriptedAgent {
 public:
  explicit ScriptedAgent(std::vector<std::string> answers) : answers_(std::move(answers)) {
    path_ = "/tmp/ctrun_ft_replica_test_" + std::to_string(::getpid()) + ".sock";
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
    REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listen_fd_, 1) == 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedAgent() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  void Serve() {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::string pending;
    size_t next = 0;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
      pending.append(buf, static_cast<size_t>(n));
      for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
        const std::string line = pending.substr(0, end);
        {
          std::lock_guard<std::mutex> lock(mu_);
          lines_.push_back(line);
        }
        if (line.rfind("sync ", 0) == 0 && next < answers_.size()) {
          const std::string& answer = answers_[next++];
          if (::write(fd, answer.data(), answer.size()) != static_cast<ssize_t>(answer.size())) break;  // the test fails on its own
        }
      }
    }
    ::close(fd);
  }

  std::vector<std::string> answers_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

std::unique_ptr<ft::FtReplica> StartReplica(const ScriptedAgent& agent) {
  auto replica = ft::FtReplica::Start(ft::FtReplicaOptions{.socket_path = agent.path(), .host = "127.0.0.1"});
  REQUIRE(replica.ok());
  return std::move(replica).value();
}

// The fields of a `sync` line.
std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin <= line.size();) {
    size_t end = line.find(' ', begin);
    if (end == std::string::npos) end = line.size();
    out.push_back(line.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("FtReplica: join, average, vote, and a new quorum's spare ring") {
  ScriptedAgent agent({"quorum - 1 0 1 0 - - 0\n", "quorum 1 1 0 1 1 - - 0\n", "quorum 0 2 0 1 1 - - 0\n",
                       "quorum 1 2 0 1 2 - - 0\n"});
  auto replica = StartReplica(agent);
  auto plan = replica->Join(0);
  REQUIRE(plan.ok());
  CHECK(plan->quorum_id == 1);
  CHECK(plan->replica_world == 1);
  CHECK(plan->max_step == 0);
  CHECK_FALSE(plan->heal_state.has_value());
  std::vector<float> grads = {1.5f, -2.0f};
  CHECK(replica->AllReduceMean(grads.data(), grads.size()));
  CHECK(grads == std::vector<float>({1.5f, -2.0f}));
  auto first = replica->Vote();
  REQUIRE(first.ok());
  CHECK(first->commit == std::optional<bool>(true));
  CHECK(first->next.max_step == 1);
  auto discarded = replica->Vote();  // step 1, discarded; quorum 2 comes with it
  REQUIRE(discarded.ok());
  CHECK(discarded->commit == std::optional<bool>(false));
  CHECK(discarded->next.quorum_id == 2);
  CHECK(discarded->next.max_step == 1);
  auto second = replica->Vote();
  REQUIRE(second.ok());
  CHECK(second->next.max_step == 2);
  const auto lines = agent.lines();
  REQUIRE(lines.size() == 4);
  const auto join = Fields(lines[0]), vote0 = Fields(lines[1]), vote1 = Fields(lines[2]), vote2 = Fields(lines[3]);
  CHECK(join[0] == "sync");
  CHECK(join[2] == "0");
  CHECK(join[5] == "-");
  CHECK(vote0[5] == "1/0/1");
  CHECK(vote1[2] == "1");  // committed step 1, voting on step 1
  CHECK(vote1[5] == "1/1/1");
  CHECK(vote2[5] == "2/1/1");
  // The spare listener's port: the first quorum took the spare of the join,
  // so the votes report a new one; quorum 2 took that, so the last differs.
  CHECK(vote0[3] != join[3]);
  CHECK(vote0[3] == vote1[3]);
  CHECK(vote2[3] != vote1[3]);
  CHECK(vote0[4] == join[4]);  // the healing server stays
}

TEST_CASE("FtReplica: an abort from the agent fails the all-reduce and the ballot is no") {
  ScriptedAgent agent({"quorum - 1 0 1 0 - - 0\n", "abort group 2 was lost\nquorum 1 1 0 1 1 - - 0\n",
                       "quorum 0 2 0 1 1 - - 0\n"});
  auto replica = StartReplica(agent);
  REQUIRE(replica->Join(0).ok());
  REQUIRE(replica->Vote().ok());  // step 0 commits; the abort arrives just before the answer
  std::vector<float> grads = {1.0f};
  CHECK_FALSE(replica->AllReduceMean(grads.data(), grads.size()));
  CHECK(replica->last_failure().code() == ctrun::Status::Code::kAborted);
  auto decision = replica->Vote();
  REQUIRE(decision.ok());
  CHECK(decision->commit == std::optional<bool>(false));
  // The next quorum's ring is a fresh one: its all-reduce works.
  CHECK(replica->AllReduceMean(grads.data(), grads.size()));
  CHECK(Fields(agent.lines()[2])[5] == "1/1/0");
}

TEST_CASE("FtReplica: a max step it is not at, without healing, is refused") {
  ScriptedAgent agent({"quorum - 1 0 1 5 - - 0\n"});
  auto replica = StartReplica(agent);
  auto plan = replica->Join(0);
  CHECK(plan.status().code() == ctrun::Status::Code::kFailedPrecondition);
  CHECK(plan.status().message() ==
        "the agent says every member trains step 5 but this worker has committed 0 steps and was not told to heal");
}
