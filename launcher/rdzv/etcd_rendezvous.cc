#include "launcher/rdzv/etcd_rendezvous.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <chrono>

#include "launcher/net/free_port.h"
#include "rendezvous/persist/machine_snapshot.h"

namespace ctrun::launcher {

namespace {


constexpr Duration kCallTimeout = std::chrono::seconds(3);
constexpr int kMaxCasAttempts = 200;

rdzv::ClockPair Now() { return rdzv::ClockPair{Clock::now(), std::chrono::system_clock::now()}; }

// "alive/<incarnation>/<pid>/<local id>/<addr>" -> node and incarnation.
std::optional<std::pair<rdzv::NodeId, uint64_t>> ParseAliveKey(const std::string& rest) {
  size_t a = rest.find('/'), b = rest.find('/', a + 1), c = rest.find('/', b + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos) return std::nullopt;
  try {
    return std::make_pair(rdzv::NodeId{rest.substr(c + 1), std::stoll(rest.substr(a + 1, b - a - 1)),
                                       std::stoll(rest.substr(b + 1, c - b - 1))},
                          std::stoull(rest.substr(0, a)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

EtcdRendezvous::EtcdRendezvous(boost::asio::io_context& io, EtcdRendezvousOptions options,
                               std::unique_ptr<rdzv::EtcdKv> kv)
    : io_(io),
      options_(std::move(options)),
      kv_(std::move(kv)),
      alive_(std::make_shared<bool>(true)),
      alive_weak_(alive_),
      join_timer_(io),
      deadline_timer_(io),
      keep_alive_timer_(io),
      close_timer_(io) {
  prefix_ = "/ctrun/rdzv/" + options_.run_id + "/";
  state_key_ = prefix_ + "state";
  alive_key_ = prefix_ + "alive/" + std::to_string(options_.incarnation) + "/" + std::to_string(options_.node.pid) +
               "/" + std::to_string(options_.node.local_id) + "/" + options_.node.addr;
  etcd_work_.emplace(etcd_io_.get_executor());
  etcd_thread_ = std::thread([this] { etcd_io_.run(); });
}

EtcdRendezvous::~EtcdRendezvous() {
  alive_.reset();
  etcd_work_.reset();
  etcd_io_.stop();
  if (etcd_thread_.joinable()) etcd_thread_.join();
  kv_.reset();  // stops the watch thread
}

void EtcdRendezvous::RunOnEtcd(std::function<void()> fn) { boost::asio::post(etcd_io_, std::move(fn)); }

void EtcdRendezvous::Post(std::function<void()> fn) {
  boost::asio::post(io_, [alive = alive_weak_, fn = std::move(fn)] {
    if (alive.lock()) fn();
  });
}

Result<EtcdRendezvous::Seen> EtcdRendezvous::Read() {
  Result<std::optional<rdzv::EtcdValue>> cur = kv_->Get(state_key_);
  if (!cur.ok()) return cur.status();
  if (!*cur) return Status::NotFound("no state yet");
  Result<rdzv::StoredRun> run = rdzv::DecodeRunState((*cur)->value, Now());
  if (!run.ok()) return Status::Internal("etcd key " + state_key_ + ": " + run.status().message());
  Result<rdzv::RendezvousMachine> m = rdzv::RendezvousMachine::Import(run->state);
  if (!m.ok()) return Status::Internal("etcd key " + state_key_ + ": " + m.status().message());
  return Seen{std::move(*m), (*cur)->mod_revision, {}};
}

// Read, refresh the nodes whose lease is alive, step, compare-and-swap.
Result<EtcdRendezvous::Seen> EtcdRendezvous::Apply(const rdzv::Event& event) {
  for (int attempt = 0; attempt < kMaxCasAttempts; ++attempt) {
    Result<std::optional<rdzv::EtcdValue>> cur = kv_->Get(state_key_);
    if (!cur.ok()) return cur.status();
    Result<std::vector<std::string>> alive = kv_->Keys(prefix_ + "alive/");
    if (!alive.ok()) return alive.status();
    const rdzv::ClockPair now = Now();
    rdzv::MachineState state;
    int64_t revision = 0;
    if (*cur) {
      Result<rdzv::StoredRun> run = rdzv::DecodeRunState((*cur)->value, now);
      if (!run.ok()) return Status::Internal("etcd key " + state_key_ + ": " + run.status().message());
      state = std::move(run->state);
      revision = (*cur)->mod_revision;
      if (state.params.min_nodes != options_.params.min_nodes || state.params.max_nodes != options_.params.max_nodes) {
        return Status::FailedPrecondition(
            "--nnodes '" + std::to_string(options_.params.min_nodes) + ":" + std::to_string(options_.params.max_nodes) +
            "' for run '" + options_.run_id + "': the run was started with --nnodes '" +
            std::to_string(state.params.min_nodes) + ":" + std::to_string(state.params.max_nodes) +
            "' (give every node the same --nnodes)");
      }
      if (std::holds_alternative<rdzv::Tick>(event)) {
        Result<rdzv::RendezvousMachine> m = rdzv::RendezvousMachine::Import(state);
        std::optional<TimePoint> next = m.ok() ? m->NextDeadline() : std::nullopt;
        if (m.ok() && (!next || *next > now.steady)) return Seen{std::move(*m), revision, {}};  // another agent ticked
      }
      for (const std::string& key : *alive) {
        auto parsed = ParseAliveKey(key.substr(prefix_.size() + 6));
        if (!parsed) continue;
        for (auto& n : state.nodes) {
          if (n.id == parsed->first && n.incarnation == parsed->second) n.last_seen = std::max(n.last_seen, now.steady);
        }
        for (auto& f : state.finishing) {
          if (f.id == parsed->first && f.incarnation == parsed->second) f.last_seen = std::max(f.last_seen, now.steady);
        }
      }
    } else {
      Result<rdzv::RendezvousMachine> fresh = rdzv::RendezvousMachine::Create(options_.params);
      if (!fresh.ok()) return fresh.status();
      state = fresh->Export();
    }
    Result<rdzv::RendezvousMachine> m = rdzv::RendezvousMachine::Import(state);
    if (!m.ok()) return Status::Internal("etcd key " + state_key_ + ": " + m.status().message());
    std::vector<rdzv::Decision> decisions = m->Step(event, now.steady);
    Result<bool> written =
        kv_->CompareAndSwap(state_key_, rdzv::EncodeRunState(rdzv::StoredRun{options_.run_id, m->Export()}, now), revision);
    if (!written.ok()) return written.status();
    if (*written) return Seen{std::move(*m), revision + 1, std::move(decisions)};
  }
  return Status::Unavailable("etcd key " + state_key_ + ": too many concurrent writers; retry");
}

Status EtcdRendezvous::Register() {
  Result<int64_t> lease = kv_->GrantLease(rdzv::KeepAliveTimeout(options_.params));
  if (!lease.ok()) return lease.status();
  lease_ = *lease;
  return kv_->PutWithLease(alive_key_, "", lease_);
}

void EtcdRendezvous::Step(rdzv::Event event) {
  RunOnEtcd([this, event] {
    Result<Seen> seen = Apply(event);
    Post([this, seen = std::move(seen)]() mutable { OnSeen(std::move(seen)); });
  });
}

void EtcdRendezvous::NextRound(std::function<void(Result<Round>)> done) {
  const std::optional<int> port = BeginJoin(io_, options_.store.port, std::move(done), phase_, pending_);
  if (!port) return;
  join_timer_.expires_after(ToDuration(options_.join_timeout));
  join_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ != Phase::kJoining) return;
    FinishJoin(Status::DeadlineExceeded("no rendezvous round formed in etcd for run '" + options_.run_id +
                                        "' within join_timeout; check that every node uses the same "
                                        "--rdzv-endpoint cluster and --rdzv-id, or raise --rdzv-conf join_timeout"));
  });
  rdzv::Join join{options_.node, options_.incarnation, options_.hint_rank, options_.local_world_size, options_.addr,
                  *port};
  const bool first = !registered_;
  registered_ = true;
  RunOnEtcd([this, join, first] {
    if (first) {
      Status s = Register();
      if (!s.ok()) return Post([this, s] { OnSeen(s); });
      kv_->Watch(prefix_, [this](const std::string& key, bool deleted) {
        if (deleted && key.rfind(prefix_ + "alive/", 0) == 0 && key != alive_key_) {
          if (auto gone = ParseAliveKey(key.substr(prefix_.size() + 6))) {
            spdlog::info("etcd lease of node {} ended; it leaves the run", rdzv::ToString(gone->first));
            rdzv::Event leave = rdzv::Leave{gone->first, gone->second, rdzv::LeaveReason::kSignal};
            RunOnEtcd([this, leave] {
              Result<Seen> seen = Apply(leave);
              Post([this, seen = std::move(seen)]() mutable { OnSeen(std::move(seen)); });
            });
          }
        }
        RunOnEtcd([this] {
          Result<Seen> seen = Read();
          if (seen.ok()) Post([this, seen = std::move(seen)]() mutable { OnSeen(std::move(seen)); });
        });
      });
      Post([this] { ArmKeepAlive(); });
    }
    Result<Seen> seen = Apply(join);
    Post([this, seen = std::move(seen)]() mutable { OnSeen(std::move(seen)); });
  });
}

void EtcdRendezvous::OnSeen(Result<Seen> seen) {
  if (!seen.ok()) {
    if (phase_ == Phase::kJoining) {
      FinishJoin(seen.status());
    } else if (phase_ != Phase::kShutdown) {
      spdlog::warn("etcd rendezvous: {}", seen.status().message());
    }
    return;
  }
  for (const rdzv::Decision& d : seen->decisions) {
    const auto* r = std::get_if<rdzv::Rejected>(&d);
    if (r && r->node == options_.node && phase_ == Phase::kJoining) return FinishJoin(rdzv::ToStatus(*r));
    const auto* t = std::get_if<rdzv::TimedOut>(&d);
    if (t && t->node == options_.node && phase_ == Phase::kJoining) return FinishJoin(rdzv::ToStatus(*t));
  }
  if (seen->revision < last_revision_) return;
  last_revision_ = seen->revision;
  machine_ = std::move(seen->machine);
  Evaluate();
  deadline_timer_.cancel();
  if (std::optional<TimePoint> next = machine_->NextDeadline(); next && phase_ != Phase::kShutdown) {
    deadline_timer_.expires_at(*next);
    deadline_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Step(rdzv::Tick{});
    });
  }
}

void EtcdRendezvous::Evaluate() {
  const rdzv::Snapshot s = machine_->State();
  const std::optional<rdzv::NodeStatus> mine = machine_->StatusOf(options_.node);
  if (phase_ == Phase::kJoining) {
    if (s.closed) return FinishJoin(Status::Aborted("rendezvous run '" + options_.run_id + "' is closed (use a new --rdzv-id for a new job)"));
    if (mine != rdzv::NodeStatus::kMember) return;
    Round round;
    round.round = static_cast<int>(s.round);
    round.run_id = options_.run_id;
    round.use_agent_store = options_.store.agent_store;
    round.group_rank = -1;
    for (const rdzv::Member& m : s.members) {
      round.local_world_sizes.push_back(m.local_world_size);
      if (m.node == options_.node) round.group_rank = m.group_rank;
    }
    if (round.group_rank < 0) return;
    round.master_addr = s.members[0].addr;
    round.master_port = s.members[0].master_port;
    round_ = s.round;
    spdlog::info("round {} complete: {} nodes, this node is group rank {}", s.round, s.members.size(), round.group_rank);
    return FinishJoin(round);
  }
  if (phase_ != Phase::kRunning) return;
  if (s.closed) {
    closed_ = true;
    return;
  }
  if (!(s.complete && s.round == round_ && mine == rdzv::NodeStatus::kMember)) {
    phase_ = Phase::kIdle;
    if (on_change_) on_change_(/*charged=*/false, "the rendezvous round " + std::to_string(round_) + " changed");
  }
}

void EtcdRendezvous::FinishJoin(Result<Round> result) {
  join_timer_.cancel();
  phase_ = result.ok() ? Phase::kRunning : Phase::kIdle;
  auto done = std::move(pending_);
  pending_ = nullptr;
  if (done) done(result);
}

void EtcdRendezvous::ArmKeepAlive() {
  keep_alive_timer_.expires_after(options_.params.keep_alive_interval);
  keep_alive_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ == Phase::kShutdown) return;
    RunOnEtcd([this] {
      Status s = kv_->KeepAlive(lease_);
      if (s.IsNotFound()) {
        spdlog::warn("etcd lease of this node expired; registering again");
        s = Register();
      }
      if (!s.ok()) spdlog::warn("etcd keep-alive failed: {}", s.message());
    });
    ArmKeepAlive();
  });
}

void EtcdRendezvous::Shutdown(ShutdownReason reason, std::function<void()> done) {
  EnterShutdown(phase_, {join_timer_, deadline_timer_, keep_alive_timer_});
  shutdown_done_ = std::move(done);
  auto finish = [this] {
    close_timer_.cancel();
    if (auto d = std::move(shutdown_done_)) {
      shutdown_done_ = nullptr;
      d();
    }
  };
  close_timer_.expires_after(ToDuration(options_.close_timeout));
  close_timer_.async_wait([this, finish](const boost::system::error_code& ec) {
    if (ec) return;
    spdlog::warn("could not leave the etcd rendezvous within close_timeout");
    finish();
  });
  const rdzv::LeaveReason why = ToLeaveReason(reason);
  rdzv::Event leave = rdzv::Leave{options_.node, options_.incarnation, why, unhealthy_report_};
  const bool registered = registered_;
  RunOnEtcd([this, leave, registered, finish] {
    if (registered) {
      Result<Seen> seen = Apply(leave);
      if (!seen.ok()) spdlog::warn("could not leave the etcd rendezvous: {}", seen.status().message());
      if (lease_ != 0) (void)kv_->Revoke(lease_);
    }
    Post(finish);
  });
}

Result<std::unique_ptr<RendezvousHandler>> MakeEtcdRendezvous(boost::asio::io_context& io,
                                                              const std::string& endpoint,
                                                              EtcdRendezvousOptions options) {
  Result<std::unique_ptr<rdzv::EtcdKv>> kv = rdzv::EtcdKv::Connect({endpoint}, kCallTimeout);
  if (!kv.ok()) return Status::Unavailable("--rdzv-backend etcd-v3 --rdzv-endpoint " + endpoint + ": " + kv.status().message());
  spdlog::info("etcd-v3 rendezvous for run '{}' via {}", options.run_id, fmt::join((*kv)->endpoints(), ","));
  return std::unique_ptr<RendezvousHandler>(std::make_unique<EtcdRendezvous>(io, std::move(options), std::move(*kv)));
}

Status EtcdSupport() { return Status::Ok(); }

}  // namespace ctrun::launcher
