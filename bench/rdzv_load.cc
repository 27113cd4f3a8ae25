// rdzv_load: N simulated agents against one rendezvous server (ctrund), in
// one process. Each agent speaks proto/rendezvous.proto as the real one does
// (launcher/rdzv/grpc_rendezvous.cc over rendezvous/grpc/client.cc): its own
// Join stream, answered by Admitted and later RoundComplete or
// RestartRequested (then it joins again at once), and its own KeepAlive
// every keep_alive_interval, started at its first Admitted.
//
// Agents are spread round-robin over --channels gRPC channels, each with its
// own TCP connection (a local subchannel pool: gRPC would otherwise share one
// connection between channels of equal arguments). The default, one channel
// per agent, is what N real agents on N hosts open.
//
// Phases (times on this process's steady clock):
//   connect  every channel connected
//   storm    N-1 agents join at once; until each has its Admitted
//   round    the last agent joins; until every agent has the round
//            (max_nodes = N: the last Join completes it)
//   drop     --drop agents (every N/drop-th) vanish at once: their Join
//            streams are cancelled (as when an agent is killed: its
//            connection's streams end) and their keep-alives stop; until
//            every survivor has the next round (min_nodes = N - drop)
// then one survivor leaves with NORMAL_EXIT (closing the run) and every
// stream is cancelled.
//
// Prints one JSON object on stdout: the phase times, whether every agent got
// the round with distinct ranks 0..N-1 (and the survivors 0..N-drop-1), and,
// with --server-pid, the server's CPU seconds at each phase's end and its
// VmHWM/VmRSS. Exit 0 when the protocol checks passed, 1 when not (the
// reason on stderr and in "error"), 2 for a bad argument.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous.grpc.pb.h"

namespace {

namespace v1 = ::ctrun::rdzv::v1;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  std::string endpoint;
  int agents = 16;
  int channels = 0;  // 0: one per agent
  int drop = -1;     // -1: 1 % of the agents, at least 1
  std::string run_id = "rdzv-load";
  double keep_alive_s = 5;
  double timeout_s = 300;
  long server_pid = 0;
};

[[noreturn]] void Usage(const std::string& what) {
  std::fprintf(stderr,
               "rdzv_load: %s\nusage: rdzv_load --endpoint HOST:PORT [--agents N] [--channels C] [--drop K] "
               "[--run-id ID] [--keep-alive-s S] [--timeout-s S] [--server-pid PID]\n",
               what.c_str());
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(flag + " needs a value");
    const std::string value = argv[++i];
    auto number = [&](double lo) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || v < lo) {
        Usage(flag + " '" + value + "': give a number >= " + std::to_string(static_cast<long>(lo)));
      }
      return v;
    };
    if (flag == "--endpoint") o.endpoint = value;
    else if (flag == "--agents") o.agents = static_cast<int>(number(2));
    else if (flag == "--channels") o.channels = static_cast<int>(number(1));
    else if (flag == "--drop") o.drop = static_cast<int>(number(1));
    else if (flag == "--run-id") o.run_id = value;
    else if (flag == "--keep-alive-s") o.keep_alive_s = number(0.001);
    else if (flag == "--timeout-s") o.timeout_s = number(1);
    else if (flag == "--server-pid") o.server_pid = static_cast<long>(number(1));
    else Usage("unknown flag " + flag);
  }
  if (o.endpoint.empty()) Usage("--endpoint is required");
  if (o.channels == 0 || o.channels > o.agents) o.channels = o.agents;
  if (o.drop < 0) o.drop = std::max(1, o.agents / 100);
  if (o.drop >= o.agents) Usage("--drop " + std::to_string(o.drop) + " must be below --agents");
  return o;
}

// The server's CPU seconds (user + system) and memory, from /proc.
struct ServerUsage {
  double cpu_s = -1;
  long hwm_kib = -1;
  long rss_kib = -1;
};

ServerUsage ReadServer(long pid) {
  ServerUsage u;
  if (pid <= 0) return u;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the ")" that ends the command name: state is field 3;
    // utime and stime are fields 14 and 15.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int f = 3; f <= 15 && rest >> field; ++f) {
      if (f >= 14) ticks += std::stod(field);
    }
    u.cpu_s = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) u.hwm_kib = std::atol(line.c_str() + 6);
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::atol(line.c_str() + 6);
  }
  return u;
}

class Load;

// One simulated agent. Its Join stream and keep-alive are driven from
// gRPC's callback threads; `mu` guards `call` and `dropped`.
struct Agent {
  int index = 0;
  v1::NodeId node;
  uint64_t incarnation = 0;
  v1::Rendezvous::Stub* stub = nullptr;
  std::mutex mu;
  // Its Join streams that have not ended: the newest, and older ones the
  // server has not ended yet (a new Join replaces the old stream on the
  // server's side). Dropping the agent cancels them all, as a killed
  // agent's closed connection would.
  std::vector<class JoinCall*> calls;
  bool dropped = false;
  bool admitted = false;
  // Keep-alives (the keep-alive thread only, after `keep_alive_on`).
  std::atomic<bool> keep_alive_on{false};
  TimePoint next_keep_alive{};
  // The last RoundComplete: round, this agent's group rank, when it came.
  uint64_t round = UINT64_MAX;
  int rank = -1;
  TimePoint round_at{};
};

class JoinCall final : public grpc::ClientReadReactor<v1::Update> {
 public:
  JoinCall(Load* load, Agent* agent) : load_(load), agent_(agent) {}
  void Start(const v1::JoinRequest& request);
  void Cancel() { ctx_.TryCancel(); }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  Load* load_;
  Agent* agent_;
  grpc::ClientContext ctx_;
  v1::JoinRequest request_;
  v1::Update update_;
};

class Load {
 public:
  explicit Load(Options o) : o_(std::move(o)) {}

  int Run();
  void OnUpdate(Agent& a, const v1::Update& u);
  void CallEnded(Agent& a, JoinCall* call, const grpc::Status& status);

 private:
  void Join(Agent& a);
  void Fail(const std::string& what);
  // Waits until `done()` (checked under mu_) or the timeout; false on timeout or failure.
  template <class Pred>
  bool WaitFor(Pred done, const char* phase);
  void KeepAliveLoop();
  std::string CheckRanks(uint64_t round, int expect, const char* which);
  void Report(bool ok);

  Options o_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs_;
  std::vector<std::unique_ptr<Agent>> agents_;
  v1::RunParams params_;

  std::mutex mu_;
  std::condition_variable cv_;
  int admitted_ = 0;
  std::vector<int> rounds_seen_;  // agents that got round r, by r (small)
  std::string error_;
  int calls_ = 0;  // Join streams and keep-alives in flight
  bool stop_ = false;

  std::atomic<long> keep_alives_{0};
  std::atomic<long> keep_alive_errors_{0};
  TimePoint deadline_{};
  std::vector<std::pair<std::string, double>> times_;
  std::vector<std::pair<std::string, ServerUsage>> usage_;
};

void JoinCall::Start(const v1::JoinRequest& request) {
  request_ = request;
  ctx_.set_wait_for_ready(true);
  agent_->stub->async()->Join(&ctx_, &request_, this);
  StartRead(&update_);
  StartCall();
}

void JoinCall::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  load_->OnUpdate(*agent_, update_);
  update_ = v1::Update();  // frees the round's 40 KB (at 10k) instead of keeping it per agent
  StartRead(&update_);
}

void JoinCall::OnDone(const grpc::Status& status) {
  load_->CallEnded(*agent_, this, status);
  delete this;
}

void Load::Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.empty()) error_ = what;
  cv_.notify_all();
}

void Load::Join(Agent& a) {
  v1::JoinRequest req;
  req.set_version(v1::PROTOCOL_VERSION_3);
  req.set_run_id(o_.run_id);
  *req.mutable_node() = a.node;
  req.set_incarnation(a.incarnation);
  req.set_local_world_size(1);
  req.set_master_port(20000 + a.index % 10000);
  *req.mutable_params() = params_;
  auto* call = new JoinCall(this, &a);
  {
    // Checked where the drop cancels a.calls: an agent dropped while it was
    // answering a RestartRequested must not open a stream nobody cancels
    // (the server would wait for its keep-alives to run out). A call
    // cancelled between here and Start starts cancelled (ClientContext).
    std::lock_guard<std::mutex> lock(a.mu);
    if (a.dropped) {
      delete call;
      return;
    }
    a.calls.push_back(call);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  call->Start(req);
}

void Load::CallEnded(Agent& a, JoinCall* call, const grpc::Status& status) {
  bool dropped;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    a.calls.erase(std::remove(a.calls.begin(), a.calls.end(), call), a.calls.end());
    dropped = a.dropped;
  }
  std::lock_guard<std::mutex> lock(mu_);
  --calls_;
  // The server ends a stream OK when a newer Join replaced it or the run
  // closed; anything else before the end is a failure.
  if (!status.ok() && !dropped && !stop_ && error_.empty()) {
    error_ = "agent " + std::to_string(a.index) + ": Join stream ended: " + status.error_message();
  }
  cv_.notify_all();
}

void Load::OnUpdate(Agent& a, const v1::Update& u) {
  const TimePoint now = SteadyClock::now();
  switch (u.kind_case()) {
    case v1::Update::kAdmitted: {
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(a.mu);
        first = !a.admitted;
        a.admitted = true;
      }
      if (first) {
        // As the real agent: keep-alives from its first Join on, every interval.
        a.next_keep_alive = now + std::chrono::duration_cast<SteadyClock::duration>(
                                      std::chrono::duration<double>(o_.keep_alive_s));
        a.keep_alive_on = true;
        std::lock_guard<std::mutex> lock(mu_);
        if (++admitted_ == static_cast<int>(agents_.size()) - 1) cv_.notify_all();
      }
      return;
    }
    case v1::Update::kRoundComplete: {
      const v1::RoundComplete& rc = u.round_complete();
      int rank = -1;
      for (const v1::Member& m : rc.members()) {
        if (m.node().addr() == a.node.addr() && m.node().pid() == a.node.pid() &&
            m.node().local_id() == a.node.local_id()) {
          rank = m.group_rank();
        }
      }
      int64_t nodes = 0, workers = 0;
      for (int i = 0; i < rc.local_world_size_values_size() && i < rc.local_world_size_counts_size(); ++i) {
        nodes += rc.local_world_size_counts(i);
        workers += int64_t{rc.local_world_size_values(i)} * rc.local_world_size_counts(i);
      }
      if (rank < 0 || rank >= nodes || workers != rc.world_size() || rc.members_size() < 1 ||
          rc.members(0).group_rank() != 0) {
        Fail("agent " + std::to_string(a.index) + ": round " + std::to_string(rc.round()) +
             " is malformed (no own member, no rank 0, or world_size " + std::to_string(rc.world_size()) +
             " != " + std::to_string(workers) + " workers in the size list)");
        return;
      }
      a.round = rc.round();
      a.rank = rank;
      a.round_at = now;
      std::lock_guard<std::mutex> lock(mu_);
      if (rounds_seen_.size() <= rc.round()) rounds_seen_.resize(rc.round() + 1, 0);
      ++rounds_seen_[rc.round()];
      cv_.notify_all();
      return;
    }
    case v1::Update::kRestartRequested: {
      bool dropped;
      {
        std::lock_guard<std::mutex> lock(a.mu);
        dropped = a.dropped;
      }
      // As the real agent after stopping its workers: a new Join stream;
      // the server ends the old one.
      if (!dropped) Join(a);
      return;
    }
    case v1::Update::kClosed:
      return;
    default: {
      bool dropped;
      {
        std::lock_guard<std::mutex> lock(a.mu);
        dropped = a.dropped;
      }
      if (!dropped) {
        std::string what = u.has_rejected() ? "rejected: " + u.rejected().message()
                           : u.has_timed_out() ? "timed out: " + u.timed_out().message()
                           : u.has_evicted()   ? "evicted: " + u.evicted().message()
                                               : "an unknown update";
        Fail("agent " + std::to_string(a.index) + ": " + what);
      }
      return;
    }
  }
}

template <class Pred>
bool Load::WaitFor(Pred done, const char* phase) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool ok = cv_.wait_until(lock, deadline_, [&] { return !error_.empty() || done(); });
  if (!ok && error_.empty()) error_ = std::string("timed out (--timeout-s) in phase ") + phase;
  return error_.empty();
}

void Load::KeepAliveLoop() {
  const auto interval =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(o_.keep_alive_s));
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; })) return;
    }
    const TimePoint now = SteadyClock::now();
    for (auto& ap : agents_) {
      Agent& a = *ap;
      if (!a.keep_alive_on || now < a.next_keep_alive) continue;
      a.next_keep_alive += interval;
      struct Call {
        grpc::ClientContext ctx;
        v1::KeepAliveRequest req;
        v1::KeepAliveReply rep;
      };
      auto* call = new Call;
      // As the real client: each keep-alive is bounded by the interval.
      call->ctx.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                 std::chrono::duration<double>(o_.keep_alive_s)));
      call->ctx.set_wait_for_ready(true);
      call->req.set_version(v1::PROTOCOL_VERSION_3);
      call->req.set_run_id(o_.run_id);
      *call->req.mutable_node() = a.node;
      call->req.set_incarnation(a.incarnation);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_;
      }
      a.stub->async()->KeepAlive(&call->ctx, &call->req, &call->rep, [this, call](grpc::Status s) {
        ++keep_alives_;
        if (!s.ok() || call->rep.has_rejected()) ++keep_alive_errors_;
        delete call;
        std::lock_guard<std::mutex> lock(mu_);
        --calls_;
        cv_.notify_all();
      });
    }
  }
}

// Every agent still in the run has round `round`, with ranks 0..expect-1 once each.
std::string Load::CheckRanks(uint64_t round, int expect, const char* which) {
  std::vector<int> seen(expect, 0);
  for (auto& ap : agents_) {
    if (ap->dropped) continue;
    if (ap->round != round) return std::string(which) + ": agent " + std::to_string(ap->index) + " has no round";
    if (ap->rank < 0 || ap->rank >= expect || seen[ap->rank]++) {
      return std::string(which) + ": rank " + std::to_string(ap->rank) + " out of 0.." + std::to_string(expect - 1) +
             " or repeated";
    }
  }
  return "";
}

int Load::Run() {
  const int n = o_.agents;
  params_.set_min_nodes(n - o_.drop);
  params_.set_max_nodes(n);
  params_.set_join_timeout_s(o_.timeout_s * 2);
  params_.set_last_call_timeout_s(o_.timeout_s * 2);
  params_.set_close_timeout_s(30);
  params_.set_keep_alive_interval_s(o_.keep_alive_s);
  params_.set_keep_alive_max_attempt(3);
  deadline_ = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(o_.timeout_s));

  const TimePoint t_start = SteadyClock::now();
  for (int c = 0; c < o_.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    channels_.push_back(grpc::CreateCustomChannel(o_.endpoint, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(v1::Rendezvous::NewStub(channels_.back()));
    channels_.back()->GetState(true);
  }
  const auto connect_by = std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                                std::chrono::duration<double>(o_.timeout_s));
  for (auto& ch : channels_) {
    if (!ch->WaitForConnected(connect_by)) {
      std::fprintf(stderr, "rdzv_load: cannot connect to %s (is ctrund listening? is the fd limit high enough?)\n",
                   o_.endpoint.c_str());
      return 1;
    }
  }
  times_.emplace_back("connect_s", Seconds(SteadyClock::now() - t_start));
  usage_.emplace_back("connected", ReadServer(o_.server_pid));

  for (int i = 0; i < n; ++i) {
    auto a = std::make_unique<Agent>();
    a->index = i;
    a->node.set_addr("10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
                     std::to_string(i % 256));
    a->node.set_pid(getpid());
    a->incarnation = (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint64_t>(i + 1);
    a->stub = stubs_[i % o_.channels].get();
    agents_.push_back(std::move(a));
  }
  std::thread keep_alive([this] { KeepAliveLoop(); });

  bool ok = true;
  // storm: N-1 joins at once.
  const TimePoint t_storm = SteadyClock::now();
  for (int i = 0; i + 1 < n; ++i) Join(*agents_[i]);
  ok = WaitFor([&] { return admitted_ == n - 1; }, "storm");
  times_.emplace_back("storm_s", Seconds(SteadyClock::now() - t_storm));
  usage_.emplace_back("storm", ReadServer(o_.server_pid));

  // round: the last join completes it.
  uint64_t first_round = 0;
  if (ok) {
    const TimePoint t_last = SteadyClock::now();
    Join(*agents_[n - 1]);
    ok = WaitFor(
        [&] {
          for (size_t r = 0; r < rounds_seen_.size(); ++r) {
            if (rounds_seen_[r] == n) return first_round = r, true;
          }
          return false;
        },
        "round");
    TimePoint last = t_last;
    for (auto& a : agents_) last = std::max(last, a->round_at);
    times_.emplace_back("round_s", Seconds(last - t_last));
    usage_.emplace_back("round", ReadServer(o_.server_pid));
    if (ok) {
      const std::string bad = CheckRanks(first_round, n, "first round");
      if (!bad.empty()) Fail(bad), ok = false;
    }
  }

  // drop: every (N/drop)-th agent vanishes.
  if (ok) {
    const int step = n / o_.drop;
    std::vector<JoinCall*> cancel;
    const TimePoint t_drop = SteadyClock::now();
    for (int k = 0; k < o_.drop; ++k) {
      Agent& a = *agents_[k * step];
      a.keep_alive_on = false;
      std::lock_guard<std::mutex> lock(a.mu);
      a.dropped = true;
      for (JoinCall* call : a.calls) call->Cancel();
    }
    const int survivors = n - o_.drop;
    const uint64_t next = first_round + 1;
    ok = WaitFor([&] { return rounds_seen_.size() > next && rounds_seen_[next] == survivors; }, "drop");
    TimePoint last = t_drop;
    for (auto& a : agents_) {
      if (!a->dropped) last = std::max(last, a->round_at);
    }
    times_.emplace_back("drop_round_s", Seconds(last - t_drop));
    usage_.emplace_back("drop", ReadServer(o_.server_pid));
    if (ok) {
      const std::string bad = CheckRanks(next, survivors, "round after the drop");
      if (!bad.empty()) Fail(bad), ok = false;
    }
  }

  // The end: one survivor closes the run, then every stream is cancelled.
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  keep_alive.join();
  if (ok) {
    Agent& a = *agents_[n - 1];
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::LeaveRequest req;
    req.set_version(v1::PROTOCOL_VERSION_3);
    req.set_run_id(o_.run_id);
    *req.mutable_node() = a.node;
    req.set_incarnation(a.incarnation);
    req.set_reason(v1::LeaveRequest::NORMAL_EXIT);
    v1::LeaveReply rep;
    grpc::Status s = a.stub->Leave(&ctx, req, &rep);
    if (!s.ok()) Fail("Leave: " + s.error_message()), ok = false;
  }
  for (auto& a : agents_) {
    std::lock_guard<std::mutex> lock(a->mu);
    for (JoinCall* call : a->calls) call->Cancel();
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return calls_ == 0; });
  }
  Report(ok && error_.empty());
  return ok && error_.empty() ? 0 : 1;
}

void Load::Report(bool ok) {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  const double own_cpu = Seconds(std::chrono::seconds(self.ru_utime.tv_sec) +
                                 std::chrono::microseconds(self.ru_utime.tv_usec) +
                                 std::chrono::seconds(self.ru_stime.tv_sec) +
                                 std::chrono::microseconds(self.ru_stime.tv_usec));
  std::ostringstream j;
  j << "{\"ok\": " << (ok ? "true" : "false") << ", \"agents\": " << o_.agents << ", \"channels\": " << o_.channels
    << ", \"dropped\": " << o_.drop;
  for (auto& [name, v] : times_) j << ", \"" << name << "\": " << v;
  j << ", \"keep_alives\": " << keep_alives_ << ", \"keep_alive_errors\": " << keep_alive_errors_
    << ", \"load_cpu_s\": " << own_cpu << ", \"load_hwm_kib\": " << self.ru_maxrss;
  j << ", \"server\": {";
  for (size_t i = 0; i < usage_.size(); ++i) {
    const ServerUsage& u = usage_[i].second;
    j << (i ? ", " : "") << "\"" << usage_[i].first << "\": {\"cpu_s\": " << u.cpu_s << ", \"hwm_kib\": " << u.hwm_kib
      << ", \"rss_kib\": " << u.rss_kib << "}";
  }
  j << "}";
  std::string err = error_;
  for (char& c : err) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  j << ", \"error\": \"" << err << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!ok) std::fprintf(stderr, "rdzv_load: %s\n", error_.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  // Each channel is a socket: raise the soft fd limit to the hard one.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && static_cast<rlim_t>(o.channels) + 64 > nofile.rlim_cur) {
    std::fprintf(stderr, "rdzv_load: --channels %d needs more file descriptors than the hard limit %lu: give fewer "
                 "channels or raise the limit (ulimit -Hn)\n", o.channels, static_cast<unsigned long>(nofile.rlim_cur));
    return 2;
  }
  Load load(o);
  return load.Run();
}
