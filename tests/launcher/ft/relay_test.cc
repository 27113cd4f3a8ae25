// FtRelay over a real abstract Unix socket, with a fake quorum link: the
// test plays the workers (blocking sockets, bounded waits) while the relay
// runs on its own io thread.
#include "launcher/ft/relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "base/ft_wire/agent_lines.h"
#include "rendezvous/machine/quorum_lookup.h"

namespace ctrun::launcher {
namespace {

namespace asio = boost::asio;

// The quorum server, as the test drives it: calls and leaves are recorded,
// and the test answers a call when it chooses.
class FakeLink : public FtQuorumLink {
 public:
  void Sync(const rdzv::SyncCall& call, int part,
            std::function<void(const Result<rdzv::SyncAnswer>&)> done) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back({call, part, std::move(done)});
    cv_.notify_all();
  }
  void Leave(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    leaves_.push_back(reason);
    cv_.notify_all();
  }
  void Finished(int64_t step, std::function<void()> done) override {
    std::lock_guard<std::mutex> lock(mu_);
    leaves_.push_back("finished at step " + std::to_string(step));
    cv_.notify_all();
    done();  // on the relay's thread, as the real link posts it
  }
  struct Held {
    rdzv::SyncCall call;
    int part = 0;
    std::function<void(const Result<rdzv::SyncAnswer>&)> done;
  };
  // The next call (waits for it; REQUIREs it comes within 20 s).
  Held NextCall() {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !calls_.empty(); }));
    Held h = std::move(calls_.front());
    calls_.pop_front();
    return h;
  }
  std::string NextLeave() {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !leaves_.empty(); }));
    std::string r = leaves_.front();
    leaves_.pop_front();
    return r;
  }
  size_t pending_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Held> calls_;
  std::deque<std::string> leaves_;
};

// A worker's end of the socket.
class Worker {
 public:
  explicit Worker(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  }
  ~Worker() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& line) {
    REQUIRE(::send(fd_, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size()));
  }
  // The next line without '\n', or "<closed>" when the relay closed the
  // connection (waits at most 20 s).
  std::string Line() {
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      pollfd p{fd_, POLLIN, 0};
      REQUIRE(::poll(&p, 1, 20000) == 1);
      char chunk[8192];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return "<closed>";
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  std::string buf_;
};

struct Fixture {
  explicit Fixture(int nproc = 2, EventLog* events = nullptr, int parts = 1) {
    name = "ctrun-ft-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device()());
    relay = std::make_unique<FtRelay>(io, FtRelayOptions{.group = "a", .host = "10.0.0.1", .nproc = nproc,
                                                         .parts = parts, .socket_name = name},
                                      link, events);
    REQUIRE(relay->Listen().ok());
    thread = std::thread([this] { io.run(); });
  }
  ~Fixture() {
    asio::post(io, [this] { relay.reset(); });
    work.reset();
    io.stop();
    thread.join();
  }
  // Runs `fn` on the relay's thread (answers are delivered there).
  void OnIo(std::function<void()> fn) { asio::post(io, std::move(fn)); }

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{io.get_executor()};
  FakeLink link;
  std::string name;
  std::unique_ptr<FtRelay> relay;
  std::thread thread;
};

rdzv::SyncAnswer TwoGroups(std::optional<bool> commit, int64_t id, int64_t step_a, int64_t step_b) {
  return rdzv::SyncAnswer{
      .group = "a",
      .commit = commit,
      .quorum = std::make_shared<const rdzv::Quorum>(rdzv::Quorum{.id = id,
                             .members = {{.id = "a", .step = step_a, .address = "10.0.0.1|1000/2000,1001/2001",
                                          .commit_failures = 0},
                                         {.id = "b", .step = step_b, .address = "10.0.0.2|1100/2100,1101/2101",
                                          .commit_failures = 0}}})};
}

// Both workers' first sync lines and the one call they make.
FakeLink::Held FirstCall(Fixture& f, Worker& w0, Worker& w1) {
  w0.Send("sync 0 0 1000 2000 -\n");
  w1.Send("sync 1 0 1001 2001 -\n");
  return f.link.NextCall();
}

// Both workers' first sync lines, the one call they make, answered with
// `answer`; each worker's quorum line is read (and must be one).
void FirstStep(Fixture& f, Worker& w0, Worker& w1, const rdzv::SyncAnswer& answer) {
  FakeLink::Held call = FirstCall(f, w0, w1);
  f.OnIo([&f, done = call.done, answer] { done(answer); });
  REQUIRE(w0.Line().rfind("quorum", 0) == 0);
  REQUIRE(w1.Line().rfind("quorum", 0) == 0);
}

TEST_CASE("the relay makes one call for its ranks and answers each", "[ft][relay]") {
  Fixture f;
  CHECK(f.relay->socket_env() == "@" + f.name);
  Worker w0(f.name), w1(f.name);
  w1.Send("sync 1 0 1001 2001 -\n");
  w0.Send("sync 0 0 1000 2000 -\n");
  FakeLink::Held call = f.link.NextCall();
  CHECK(call.call.address == "10.0.0.1|1000/2000,1001/2001");
  CHECK_FALSE(call.call.ballot.has_value());
  f.OnIo([&] { call.done(TwoGroups(std::nullopt, 1, 0, 0)); });
  CHECK(w0.Line() == "quorum - 1 0 2 0 10.0.0.2:1100 - 0");
  CHECK(w1.Line() == "quorum - 1 0 2 0 10.0.0.2:1101 - 0");

  w0.Send("sync 0 0 1000 2000 1/0/1\n");
  w1.Send("sync 1 0 1001 2001 1/0/1\n");
  call = f.link.NextCall();
  // The ballot says how many groups its quorum has (a restarted server waits for them).
  CHECK(call.call.ballot == rdzv::Ballot{.quorum_id = 1, .step = 0, .ok = true, .late = false, .world = 2});
  f.OnIo([&] { call.done(TwoGroups(true, 1, 1, 1)); });
  CHECK(w0.Line() == "quorum 1 1 0 2 1 10.0.0.2:1100 - 0");
  CHECK(w1.Line() == "quorum 1 1 0 2 1 10.0.0.2:1101 - 0");
}

TEST_CASE("a call the server lost (it restarted) is made again, and its answer reaches the ranks", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FirstStep(f, w0, w1, TwoGroups(std::nullopt, 1, 0, 0));
  w0.Send("sync 0 0 1000 2000 1/0/1\n");
  w1.Send("sync 1 0 1001 2001 1/0/1\n");
  FakeLink::Held call = f.link.NextCall();
  f.OnIo([&] { call.done(Status::Unavailable("rendezvous at 10.0.0.9:29400: connection reset")); });
  FakeLink::Held again = f.link.NextCall();
  CHECK(again.call.ballot == call.call.ballot);
  CHECK(again.call.committed_step == call.call.committed_step);
  CHECK(again.call.address == call.call.address);
  f.OnIo([&] { again.done(TwoGroups(std::nullopt, 1, 0, 0)); });  // the new server: no vote held, step 0 again
  CHECK(w0.Line() == "quorum - 1 0 2 0 10.0.0.2:1100 - 0");
  CHECK(w1.Line() == "quorum - 1 0 2 0 10.0.0.2:1101 - 0");
}

TEST_CASE("a rank that came late makes the group's ballot a late no", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FirstStep(f, w0, w1, TwoGroups(std::nullopt, 1, 0, 0));
  w0.Send("sync 0 0 1000 2000 1/0/2\n");
  w1.Send("sync 1 0 1001 2001 1/0/1\n");
  FakeLink::Held call = f.link.NextCall();
  CHECK(call.call.ballot == rdzv::Ballot{.quorum_id = 1, .step = 0, .ok = false, .late = true, .world = 2});
}

TEST_CASE("a node of a two-node group calls for its part and answers its ranks as the group's", "[ft][relay]") {
  Fixture f(/*nproc=*/1, nullptr, /*parts=*/2);
  f.OnIo([&] { f.relay->SetPart(1); });  // the round made this node the group's rank 1
  Worker w0(f.name);
  w0.Send("sync 0 0 1000 2000 -\n");
  FakeLink::Held call = f.link.NextCall();
  CHECK(call.part == 1);
  CHECK(call.call.address == "10.0.0.1|1000/2000");
  // The server joined each group's parts: this node's local rank 0 is
  // group a's rank 1, whose ring peer is group b's rank 1.
  rdzv::SyncAnswer answer{
      .group = "a",
      .commit = std::nullopt,
      .quorum = std::make_shared<const rdzv::Quorum>(rdzv::Quorum{.id = 1,
                             .members = {{.id = "a", .step = 0, .address = "10.0.0.9|900/901;10.0.0.1|1000/2000",
                                          .commit_failures = 0},
                                         {.id = "b", .step = 0, .address = "10.0.0.2|1100/2100;10.0.0.3|1200/2200",
                                          .commit_failures = 0}}})};
  f.OnIo([&] { call.done(answer); });
  CHECK(w0.Line() == "quorum - 1 0 2 0 10.0.0.3:1200 - 0");
}

TEST_CASE("the relay pushes abort when another member is lost", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FirstStep(f, w0, w1, TwoGroups(std::nullopt, 1, 0, 0));
  f.OnIo([&] { f.relay->OnLost("a", 1, "its own loss is not pushed to itself"); });
  f.OnIo([&] { f.relay->OnLost("b", 1, "its agent's watch stream ended"); });
  CHECK(w0.Line() == "abort replica group b of quorum 1 was lost: its agent's watch stream ended");
  CHECK(w1.Line() == "abort replica group b of quorum 1 was lost: its agent's watch stream ended");
}

TEST_CASE("a worker that exits fails the group's step: leave, and the old answer is dropped", "[ft][relay]") {
  Fixture f;
  auto w0 = std::make_unique<Worker>(f.name);
  Worker w1(f.name);
  w0->Send("sync 0 0 1000 2000 -\n");
  w1.Send("sync 1 0 1001 2001 -\n");
  FakeLink::Held stale = f.link.NextCall();
  w0->Close();
  CHECK_THAT(f.link.NextLeave(), Catch::Contains("local rank 0's worker closed its link"));
  f.OnIo([&] { stale.done(TwoGroups(std::nullopt, 1, 0, 0)); });  // dropped: that step is gone
  w1.Close();

  // The restarted workers start over; only their answer reaches them.
  Worker n0(f.name), n1(f.name);
  n0.Send("sync 0 0 1000 2000 -\n");
  n1.Send("sync 1 0 1001 2001 -\n");
  FakeLink::Held call = f.link.NextCall();
  f.OnIo([&] { call.done(TwoGroups(std::nullopt, 2, 0, 3)); });
  CHECK(n0.Line() == "quorum - 2 0 2 3 10.0.0.2:1100 10.0.0.2:2100 0");
  CHECK(n1.Line() == "quorum - 2 0 2 3 10.0.0.2:1101 10.0.0.2:2101 0");
}

TEST_CASE("a worker that said done closes its link without failing the group", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FirstStep(f, w0, w1, TwoGroups(std::nullopt, 1, 0, 0));
  w0.Send("done 0 1\n");
  w0.Close();
  w1.Close();  // no done: this one fails the group
  CHECK_THAT(f.link.NextLeave(), Catch::Contains("local rank 1's worker"));
}

TEST_CASE("when every rank said done the run is over: the server hears it, each rank gets bye", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FirstStep(f, w0, w1, TwoGroups(std::nullopt, 1, 0, 0));
  w0.Send("done 0 14\n");
  w1.Send("done 1 14\n");
  CHECK(w0.Line() == "bye");
  CHECK(w1.Line() == "bye");
  CHECK(f.link.NextLeave() == "finished at step 14");
}

TEST_CASE("a sync after the run is over is answered finished", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  w0.Send("sync 0 0 1000 2000 -\n");
  w1.Send("sync 1 0 1001 2001 -\n");
  FakeLink::Held call = f.link.NextCall();
  rdzv::SyncAnswer over{.group = "a", .commit = std::nullopt, .quorum = std::make_shared<const rdzv::Quorum>(),
                        .finished_step = 14};
  f.OnIo([&] { call.done(over); });
  CHECK(w0.Line() == "finished 14");
  CHECK(w1.Line() == "finished 14");
}

TEST_CASE("bad lines get one error line and the connection is closed", "[ft][relay]") {
  Fixture f;
  const std::pair<std::string, std::string> cases[] = {
      {"hello\n", "error worker line: unknown word 'hello' (a worker sends 'sync', 'healed' or 'done')"},
      {"sync 5 0 1 2 -\n", "error local rank 5 is not one of this node's 2 workers"},
      {std::string(5000, 'x') + "\n", "error a line longer than 4096 bytes"},
  };
  for (const auto& [line, want] : cases) {
    Worker w(f.name);
    w.Send(line);
    CHECK(w.Line() == want);
    CHECK(w.Line() == "<closed>");
  }
  // The relay still serves.
  Worker w0(f.name), w1(f.name);
  w0.Send("sync 0 0 1000 2000 -\n");
  w1.Send("sync 1 0 1001 2001 -\n");
  f.link.NextCall();
}

TEST_CASE("a refused call fails every rank with the server's reason", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FakeLink::Held call = FirstCall(f, w0, w1);
  f.OnIo([&] { call.done(Status::FailedPrecondition("another --ft-replicas than the run's")); });
  CHECK(w0.Line() == "error the quorum server refused this group's call: another --ft-replicas than the run's");
  CHECK(w0.Line() == "<closed>");
  CHECK(w1.Line().rfind("error the quorum server refused", 0) == 0);
}

TEST_CASE("a call that times out says which setting bounds it and what to check", "[ft][relay]") {
  Fixture f;
  Worker w0(f.name), w1(f.name);
  FakeLink::Held call = FirstCall(f, w0, w1);
  f.OnIo([&] { call.done(Status::DeadlineExceeded("rendezvous at h:1 did not answer in time")); });
  CHECK(w0.Line() ==
        "error no quorum within --rdzv-conf join_timeout (rendezvous at h:1 did not answer in time): check that "
        "the quorum server runs at --rdzv-endpoint and that at least MIN groups of --ft-replicas take part");
  CHECK(w0.Line() == "<closed>");
}

TEST_CASE("events: quorum_changed, replica_healing, and replica_healed once every rank reported", "[ft][relay]") {
  char dir[] = "/tmp/ctrun-ft-relay-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/events.jsonl";
  Result<std::unique_ptr<EventLog>> events = EventLog::Open(path, "run", "a");
  REQUIRE(events.ok());
  {
    Fixture f(2, events->get());
    Worker w0(f.name), w1(f.name);
    FirstStep(f, w0, w1, TwoGroups(std::nullopt, 2, 0, 3));
    w0.Send("healed 0 3 10.0.0.2:2100 100 0.5\n");
    w0.Send("sync 0 3 1000 2000 -\n");  // the healed line is read before this one
    w1.Send("healed 1 3 10.0.0.2:2101 50 0.25\n");
    w1.Send("sync 1 3 1001 2001 -\n");
    CHECK(f.link.NextCall().call.committed_step == 3);
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ::unlink(path.c_str());
  ::rmdir(dir);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["event"] == "quorum_changed");
  CHECK(lines[0]["quorum_id"] == 2);
  CHECK(lines[0]["members"].size() == 2);
  CHECK(lines[1]["event"] == "replica_healing");
  CHECK(lines[1]["sources"][0] == "10.0.0.2:2100");
  CHECK(lines[2]["event"] == "replica_healed");
  CHECK(lines[2]["bytes"] == 150);
  CHECK(lines[2]["seconds"] == 0.5);
  CHECK(lines[2]["sources"] == nlohmann::json::array({"10.0.0.2:2100", "10.0.0.2:2101"}));
}

// `whole` as a compact reply brings it (FtClient): the group's part with
// `sources` heal sources, and a quorum of the id alone.
rdzv::SyncAnswer AsCompact(const rdzv::SyncAnswer& whole, size_t sources) {
  const rdzv::QuorumLookup lookup(whole.quorum);
  rdzv::SyncAnswer out = whole;
  out.part = rdzv::OwnedPart(*lookup.PartOf(whole.group, sources), *whole.quorum);
  out.quorum = std::make_shared<const rdzv::Quorum>(rdzv::Quorum{.id = whole.quorum->id, .members = {}});
  return out;
}

TEST_CASE("a compact answer gives the ranks the whole quorum's lines, and quorum_changed its members",
          "[ft][relay]") {
  char dir[] = "/tmp/ctrun-ft-relay-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/events.jsonl";
  Result<std::unique_ptr<EventLog>> events = EventLog::Open(path, "run", "a");
  REQUIRE(events.ok());
  const rdzv::SyncAnswer whole = TwoGroups(std::nullopt, 2, 0, 3);  // "a" heals from "b"
  Result<std::vector<ft_wire::QuorumLine>> expected = FtRankAnswers(whole, "a", 2);
  REQUIRE(expected.ok());
  REQUIRE_FALSE((*expected)[1].heal_sources.empty());
  {
    Fixture f(2, events->get());
    Worker w0(f.name), w1(f.name);
    FakeLink::Held call = FirstCall(f, w0, w1);
    f.OnIo([&] { call.done(AsCompact(whole, FtCompactSources(2, 1))); });
    CHECK(w0.Line() + "\n" == ft_wire::FormatQuorum((*expected)[0]));
    CHECK(w1.Line() + "\n" == ft_wire::FormatQuorum((*expected)[1]));
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ::unlink(path.c_str());
  ::rmdir(dir);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["event"] == "quorum_changed");
  CHECK(lines[0]["members"] == nlohmann::json::array({{{"group", "a"}, {"step", 0}}, {{"group", "b"}, {"step", 3}}}));
  CHECK(lines[1]["event"] == "replica_healing");
}

TEST_CASE("quorum_changed lists the members of the whole quorum or of a compact part, none above 64 groups",
          "[ft][relay]") {
  const rdzv::SyncAnswer whole = TwoGroups(true, 2, 4, 4);
  const ft_wire::QuorumLine first = (*FtRankAnswers(whole, "a", 2))[0];
  const nlohmann::ordered_json listed = QuorumChangedFields(whole, first);
  CHECK(listed["members"].size() == 2);
  CHECK(QuorumChangedFields(AsCompact(whole, 3), first) == listed);

  rdzv::SyncAnswer big = AsCompact(whole, 3);  // a part of a quorum above rdzv::kCompactMembersMax
  big.part->world = 65;
  big.part->members.clear();
  ft_wire::QuorumLine big_first = first;
  big_first.replica_world = 65;
  const nlohmann::ordered_json fields = QuorumChangedFields(big, big_first);
  CHECK_FALSE(fields.contains("members"));
  CHECK(fields["replica_world"] == 65);
  CHECK(fields["quorum_id"] == 2);
}

TEST_CASE("QuorumWaitingLine: how many groups, where, which run, which step, and until when", "[ft][relay]") {
  CHECK(QuorumWaitingLine(2, 12, "127.0.0.1:29400", "job5", 10.7, 589.2) ==
        "waiting for a quorum of at least 2 replica groups at 127.0.0.1:29400, run 'job5' (this group is at "
        "step 12, asked 10 s ago); giving up in 590 s");
  // One group; a deadline already past reads 0, never negative.
  CHECK(QuorumWaitingLine(1, 0, "node0:29400", "job5", 5, -1) ==
        "waiting for a quorum of at least 1 replica group at node0:29400, run 'job5' (this group is at step 0, "
        "asked 5 s ago); giving up in 0 s");
}

}  // namespace
}  // namespace ctrun::launcher
