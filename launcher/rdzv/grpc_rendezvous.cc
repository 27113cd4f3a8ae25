#include "launcher/rdzv/grpc_rendezvous.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <utility>
#include <variant>

#include "launcher/net/free_port.h"
#include "launcher/rdzv/waiting_line.h"
#include "rendezvous/grpc/client/log_client.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::launcher {

namespace {

// "host:port" or "[v6]:port" -> {host without brackets, port}; the
// endpoint was checked when the plan was made.
std::pair<std::string, int> SplitEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  std::string host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  if (colon != std::string::npos) port = std::atoi(endpoint.c_str() + colon + 1);
  return {host, port};
}


constexpr auto kStatusEvery = std::chrono::seconds(5);
constexpr Duration kSignalLeaveTimeout = std::chrono::seconds(2);
constexpr Duration kPreemptSendTimeout = std::chrono::seconds(5);
// A reconnect waits for the server (wait-for-ready) and needs no delay; the
// delay only spaces retries after a server that answers and fails at once
// (e.g. one shutting down).
constexpr Duration kFirstReconnectDelay = std::chrono::milliseconds(100);
constexpr Duration kMaxReconnectDelay = std::chrono::seconds(2);

std::string Why(const rdzv::RestartRequested& r) {
  switch (r.reason) {
    case rdzv::RestartReason::kNodeJoinedWaitList:
      return "node " + rdzv::ToString(r.cause) + " joined";
    case rdzv::RestartReason::kNodeLost:
      return "node " + rdzv::ToString(r.cause) + " was lost (no keep-alive)";
    case rdzv::RestartReason::kNodeLeft:
      return "node " + rdzv::ToString(r.cause) + " left the round";
    case rdzv::RestartReason::kWorkersFailed:
      return "workers failed on node " + rdzv::ToString(r.cause);
  }
  return "membership changed";
}

}  // namespace

GrpcRendezvous::GrpcRendezvous(boost::asio::io_context& io, GrpcRendezvousOptions options,
                               std::unique_ptr<HostedServer> hosted)
    : io_(io),
      options_(std::move(options)),
      alive_(std::make_shared<bool>(true)),
      hosted_(std::move(hosted)),
      join_timer_(io),
      keep_alive_timer_(io),
      status_timer_(io),
      barrier_timer_(io),
      reconnect_timer_(io),
      verdict_timer_(io) {
  std::weak_ptr<bool> alive = alive_;
  client_ = std::make_unique<rdzv::RendezvousClient>(
      options_.client, [&io, alive](std::function<void()> fn) {
        boost::asio::post(io, [alive, fn = std::move(fn)] {
          if (alive.lock()) fn();
        });
      });
}

GrpcRendezvous::~GrpcRendezvous() {
  alive_.reset();
  client_.reset();
  if (hosted_) hosted_->Stop();
}

void GrpcRendezvous::NextRound(std::function<void(Result<Round>)> done) {
  const std::optional<int> port = BeginJoin(io_, options_.store.port, std::move(done), phase_, pending_);
  if (!port) return;
  rdzv::JoinArgs args;
  args.hint_rank = options_.hint_rank;
  args.local_world_size = options_.local_world_size;
  args.addr = options_.advertise_addr;
  args.master_port = *port;
  join_args_ = args;
  reconnect_timer_.cancel();
  reconnecting_ = false;
  heard_ = false;
  client_->Join(
      args, [this](const rdzv::Update& u) { OnUpdate(u); },
      [this](const Status& s) { OnStreamEnd(s); });

  ProbeTls();
  join_deadline_ = Clock::now() + ToDuration(options_.join_timeout);
  join_timer_.expires_after(ToDuration(options_.join_timeout));
  join_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ != Phase::kJoining) return;
    FinishJoin(Status::DeadlineExceeded(
        "no rendezvous round formed at " + options_.client.endpoint + " for run '" +
        options_.client.run_id + "' within join_timeout (" +
        std::to_string(static_cast<int>(options_.join_timeout.count())) +
        " s); check that every node uses the same --rdzv-endpoint and --rdzv-id, or raise "
        "--rdzv-conf join_timeout"));
  });
  if (!keep_alive_started_) {
    keep_alive_started_ = true;
    ArmKeepAlive();
  }
  ArmStatusLine();
}

void GrpcRendezvous::OnUpdate(const rdzv::Update& update) {
  heard_ = true;
  if (reconnecting_) {
    reconnecting_ = false;
    spdlog::info("reconnected to the rendezvous at {}", options_.client.endpoint);
  }
  std::visit([this](const auto& u) { Handle(u); }, update);
}

void GrpcRendezvous::Handle(const rdzv::Admitted& a) {
  if (a.state == rdzv::AdmitState::kRedundant) {
    spdlog::info("the run is full: waiting as a hot spare");
  }
}

Result<Round> GrpcRendezvous::RoundFrom(const rdzv::RoundComplete& rc) const {
  Round round;
  round.round = static_cast<int>(rc.round);
  round.run_id = options_.client.run_id;
  round.use_agent_store = options_.store.agent_store;
  round.group_rank = -1;
  if (rc.members.empty()) {
    return Status::Internal("the rendezvous sent a round whose size list is malformed "
                            "(use the same ctrun version on every node and for ctrund)");
  }
  for (const rdzv::Member& m : rc.members) {
    round.local_world_sizes.push_back(m.local_world_size);
    if (m.node == options_.client.node) round.group_rank = m.group_rank;
  }
  if (round.group_rank < 0) return Status::Internal("the rendezvous completed a round without this node");
  round.master_addr = rc.members[0].addr;
  round.master_port = rc.members[0].master_port;
  if (options_.fixed_master) {
    round.master_addr = options_.fixed_master->first;
    round.master_port = options_.fixed_master->second;
  } else if (rc.store_on_rendezvous_port && options_.store.agent_store) {
    // One port per job: the server that runs the rendezvous serves the
    // workers' store on its own port (rendezvous/grpc/net/port_mux.h).
    const auto [host, port] = SplitEndpoint(options_.client.endpoint);
    round.master_addr = host;
    round.master_port = port;
  }
  return round;
}

void GrpcRendezvous::Handle(const rdzv::RoundComplete& rc) {
  if (phase_ != Phase::kJoining) return;
  Result<Round> round = RoundFrom(rc);
  if (!round.ok()) {
    FinishJoin(std::move(round));
    return;
  }
  if (options_.store.agent_store && !options_.fixed_master && store_on_port_ != rc.store_on_rendezvous_port) {
    store_on_port_ = rc.store_on_rendezvous_port;
    if (*store_on_port_) {
      spdlog::info("the workers' store is served on the rendezvous port ({})", options_.client.endpoint);
    } else {
      spdlog::info("the rendezvous at {} does not serve the workers' store on its port for this round: "
                   "group rank 0's agent hosts it on {}:{}",
                   options_.client.endpoint, round->master_addr, round->master_port);
    }
  }
  round_ = rc.round;
  if (!rc.hint_note.empty()) spdlog::warn("--node-rank ignored: {}", rc.hint_note);
  spdlog::info("round {} complete: {} nodes, world size {}, this node is group rank {}",
               rc.round, rc.members.size(), rc.world_size, round->group_rank);
  FinishJoin(std::move(round));
}

void GrpcRendezvous::Handle(const rdzv::RestartRequested& r) {
  if (phase_ != Phase::kRunning) return;
  Changed(r.cause == options_.client.node ? "the round changed while the rendezvous was unreachable" : Why(r));
}

void GrpcRendezvous::Handle(const rdzv::Rejected& r) {
  if (phase_ != Phase::kJoining) return;
  FinishJoin(Status(rdzv::ToStatus(r).code() == Status::Code::kAborted
                        ? Status::Aborted("rendezvous run '" + options_.client.run_id + "' is closed: " +
                                          r.message + " (use a new --rdzv-id for a new job)")
                        : rdzv::ToStatus(r)));
}

void GrpcRendezvous::Handle(const rdzv::TimedOut& t) {
  if (phase_ == Phase::kJoining) FinishJoin(Status::DeadlineExceeded(t.message));
}

void GrpcRendezvous::Handle(const rdzv::Evicted& e) {
  if (phase_ == Phase::kRunning) Changed("this node was evicted: " + e.message);
}

void GrpcRendezvous::Handle(const rdzv::Closed& c) {
  closed_ = true;
  if (c.failed_exit && c.verdict) closed_verdict_ = c.verdict;
  if (c.failed_exit && (phase_ == Phase::kJoining || phase_ == Phase::kRunning) && on_run_failed_) {
    // Told first, so that a join refused below ends with the verdict known.
    RunFailedCallback cb = std::move(on_run_failed_);
    on_run_failed_ = nullptr;
    cb(c.verdict);
  }
  if (closed_verdict_ && verdict_done_) {  // a ResolveVerdict waits for it
    verdict_timer_.cancel();
    auto done = std::move(verdict_done_);
    verdict_done_ = nullptr;
    done(closed_verdict_);
  }
  if (c.unhealthy_budget_exceeded) {
    // The job ends on every node: a joining one fails its join at once;
    // a running one stops its workers and re-joins, which the closed run
    // refuses the same way (Rejected{kUnhealthyBudget}).
    if (phase_ == Phase::kJoining) FinishJoin(Status::ResourceExhausted(c.message));
    if (phase_ == Phase::kRunning) Changed("the job's unhealthy-node budget is exhausted: " + c.message);
    return;
  }
  if (phase_ == Phase::kJoining) {
    FinishJoin(Status::Aborted("rendezvous run '" + options_.client.run_id +
                               "' was closed while this node was joining"));
  }
}

// The server pushes a run's first notice once; a reconnect to a restarted
// ctrund that lost it could bring another, which is dropped here.
void GrpcRendezvous::Handle(const rdzv::PreemptNotice& n) {
  if (phase_ == Phase::kShutdown || preempt_heard_ || n.from == options_.client.node) return;
  preempt_heard_ = true;
  spdlog::info("preemption notice from node {} ({}, {:g} s left)", rdzv::ToString(n.from), n.source,
               n.remaining_s);
  if (on_preempt_) on_preempt_(PreemptNotice{n.remaining_s, n.source, n.from.addr});
}

void GrpcRendezvous::OnStreamEnd(const Status& status) {
  if (status.ok() || status.IsAborted()) return;  // finished by the server, or cancelled by us
  if (status.IsUnavailable() && (phase_ == Phase::kJoining || (phase_ == Phase::kRunning && !closed_))) {
    Reconnect(status);
    return;
  }
  if (phase_ == Phase::kJoining) {
    FinishJoin(status);
  } else if (phase_ == Phase::kRunning && !closed_) {
    Changed("lost the rendezvous server (" + status.message() + ")");
  }
}

// The join timer still bounds a joining node; a running one keeps trying
// while its workers run.
void GrpcRendezvous::Reconnect(const Status& why) {
  if (!reconnecting_) {
    spdlog::warn("lost the rendezvous at {} ({}); reconnecting {}", options_.client.endpoint, why.message(),
                 phase_ == Phase::kJoining ? "until join_timeout" : "while the workers run");
    reconnect_delay_ = kFirstReconnectDelay;
  }
  reconnecting_ = true;
  reconnect_timer_.expires_after(reconnect_delay_);
  reconnect_delay_ = std::min(reconnect_delay_ * 2, kMaxReconnectDelay);
  reconnect_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (phase_ == Phase::kJoining) {
      join_args_.reconnect = rdzv::Reconnect::kJoining;
    } else if (phase_ == Phase::kRunning && !closed_) {
      join_args_.reconnect = rdzv::Reconnect::kRunning;
    } else {
      return;
    }
    client_->Join(
        join_args_, [this](const rdzv::Update& u) { OnUpdate(u); },
        [this](const Status& s) { OnStreamEnd(s); });
  });
}

void GrpcRendezvous::FinishJoin(Result<Round> result) {
  if (result.status().code() == Status::Code::kFailedPrecondition) refused_ = true;
  join_timer_.cancel();
  status_timer_.cancel();
  if (!result.ok()) reconnect_timer_.cancel();
  phase_ = result.ok() ? Phase::kRunning : Phase::kIdle;
  if (!result.ok()) client_->CancelJoin();
  auto done = std::move(pending_);
  pending_ = nullptr;
  if (done) done(result);
}

void GrpcRendezvous::Changed(const std::string& why) {
  phase_ = Phase::kIdle;
  if (on_change_) on_change_(/*charged=*/false, why);
}

void GrpcRendezvous::ArmKeepAlive() {
  keep_alive_timer_.expires_after(ToDuration(options_.client.params.keep_alive_interval));
  keep_alive_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ == Phase::kShutdown) return;
    std::optional<rdzv::StepReport> steps = step_source_ ? step_source_() : std::nullopt;
    client_->KeepAlive(steps, [this](const Status& s, const std::vector<rdzv::StragglerChange>& stragglers) {
      if (on_straggler_) {
        for (const rdzv::StragglerChange& c : stragglers) on_straggler_(c);
      }
      if (s.IsNotFound() && phase_ == Phase::kRunning) {
        Changed("the rendezvous no longer knows this node (" + s.message() + ")");
      } else if (!s.ok() && !s.IsAborted()) {
        // Once per streak; a lost Join stream has said so already.
        if (!keep_alive_failing_ && !reconnecting_) {
          spdlog::warn("keep-alive failed: {} (retrying every {:g} s; said once until one gets through)",
                       s.message(),
                       std::chrono::duration<double>(options_.client.params.keep_alive_interval).count());
        }
        keep_alive_failing_ = true;
      } else if (s.ok() && keep_alive_failing_) {
        keep_alive_failing_ = false;
        spdlog::info("keep-alives reach the rendezvous at {} again", options_.client.endpoint);
      }
    });
    ArmKeepAlive();
  });
}

// A failing TLS handshake never ends the Join (it waits for the server);
// GetState fails fast and tells it apart (FailedPrecondition). Asked once at
// once, then with every status line.
void GrpcRendezvous::ProbeTls() {
  if (!options_.client.tls.ClientSide()) return;
  client_->GetState(std::chrono::seconds(2), [this](const Result<rdzv::Counts>& st) {
    if (phase_ == Phase::kJoining && st.status().code() == Status::Code::kFailedPrecondition) {
      FinishJoin(st.status());
    }
  });
}

void GrpcRendezvous::ArmStatusLine() {
  status_timer_.expires_after(kStatusEvery);
  status_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || phase_ != Phase::kJoining) return;
    client_->GetState(std::chrono::seconds(2), [this](const Result<rdzv::Counts>& st) {
      if (phase_ != Phase::kJoining) return;
      if (st.status().code() == Status::Code::kFailedPrecondition) return FinishJoin(st.status());
      if (!st.ok()) {
        spdlog::info("waiting for the rendezvous at {}: {}", options_.client.endpoint,
                     st.status().message());
        return;
      }
      const auto seconds_to = [](TimePoint t) { return std::chrono::duration<double>(t - Clock::now()).count(); };
      std::optional<double> last_call;
      if (st->last_call_deadline) last_call = seconds_to(*st->last_call_deadline);
      spdlog::info("{}", WaitingLine(*st, options_.client.endpoint, options_.client.run_id,
                                     seconds_to(join_deadline_), last_call));
    });
    ArmStatusLine();
  });
}

rdzv::LogSinkFactory GrpcRendezvous::LogSinks() {
  // The static backend's server only hands out ranks: it keeps no logs.
  if (options_.fixed_master) return nullptr;
  // The label the status table and --why show: two agents on one host differ.
  rdzv::NodeId label = options_.client.node;
  if (!options_.advertise_addr.empty()) label.addr = options_.advertise_addr;
  return rdzv::MakeLogSinkFactory(options_.client, rdzv::ToString(label));
}

}  // namespace ctrun::launcher
