// GrpcRendezvous: the multi-node RendezvousHandler, a client of ctrun's gRPC
// rendezvous (proto/rendezvous.proto) hosted by one of the agents or by the
// ctrund daemon.
//
// Each NextRound opens a Join stream carrying this node's worker count, the
// address to publish as MASTER_ADDR (--local-addr, else whatever address the
// server sees the request come from) and a free local port for MASTER_PORT
// (fresh every round). With the agent store, a round whose server serves
// the workers' store on the rendezvous port (RoundComplete's
// store_on_rendezvous_port) gives the workers MASTER_ADDR:MASTER_PORT = the
// --rdzv-endpoint: one port per job. The server pushes membership changes on that stream
// at once; they reach the agent through OnChange. Keep-alives go out every
// keep_alive_interval for the agent's whole life.
//
// A stream that breaks (UNAVAILABLE: the ctrund daemon was killed, the
// connection dropped) is re-opened, not treated as fatal: while joining,
// until join_timeout; while the workers run, for as long as they run (they
// do not need the rendezvous), with the reconnect flag of
// rendezvous/grpc/convert/reconnect.h so that a restarted daemon that kept the run
// (--state-dir) continues the round instead of restarting it.
//
// When this agent hosts the server (`hosted` is set), Shutdown keeps serving
// until every other node has left the run or --exit-barrier-timeout passes,
// so that peers still finishing are not cut off.
//
// Thread model: io_context thread only; gRPC results arrive by post.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "launcher/cli/launch_config.h"
#include "launcher/rdzv/remote_phase.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/grpc/client/client.h"

namespace ctrun::launcher {

// Something this agent hosts and must stop last (the rendezvous server).
class HostedServer {
 public:
  virtual ~HostedServer() = default;
  virtual void Stop() = 0;
  // Runs `cb`, on any thread, once no other node is left in the run.
  virtual void WhenDrained(std::function<void()> cb) = 0;
};

struct GrpcRendezvousOptions {
  rdzv::ClientOptions client;
  std::optional<int> hint_rank;   // --node-rank, when the user gave it
  int local_world_size = 1;
  std::string advertise_addr;     // "" = the address the server sees
  // Static backend: workers get exactly --master-addr/--master-port.
  std::optional<std::pair<std::string, int>> fixed_master;
  // Who hosts the workers' store; with store.port, joins advertise it as
  // this node's master port (launcher/rdzv/rendezvous_handler.h).
  StoreHosting store;
  Seconds join_timeout{600};
  Seconds close_timeout{30};
  Seconds exit_barrier_timeout{300};
};

class GrpcRendezvous : public RendezvousHandler {
 public:
  // `io` must outlive this object; `hosted` may be null.
  GrpcRendezvous(boost::asio::io_context& io, GrpcRendezvousOptions options,
                 std::unique_ptr<HostedServer> hosted);
  ~GrpcRendezvous() override;

  void NextRound(std::function<void(Result<Round>)> done) override;
  void OnChange(ChangeCallback cb) override { on_change_ = std::move(cb); }
  void Shutdown(ShutdownReason reason, std::function<void()> done) override;
  void SetUnhealthyReport(const std::string& report) override { unhealthy_report_ = report; }
  void TrackSteps(StepSource source, StragglerCallback on_change) override {
    step_source_ = std::move(source);
    on_straggler_ = std::move(on_change);
  }
  // Preempt to the server, bounded by close_timeout (at most 5 s); the
  // outcome is logged. A notice the Join stream brings (PreemptNotice) goes
  // to `cb` once per agent process, in any phase but shutdown.
  void SendPreemptNotice(const PreemptNotice& notice) override;
  void OnPreemptNotice(PreemptCallback cb) override { on_preempt_ = std::move(cb); }
  // ShipLogs streams to the same server, from this node, labelled with its
  // advertised address (--local-addr), else its NodeId's address.
  rdzv::LogSinkFactory LogSinks() override;
  // ReportFailure to the server, bounded by close_timeout (at most 5 s); a
  // failed call is a warning. Shutdown's Leave waits for the reports in
  // flight.
  void ReportFailures(const FailureReport& report) override;
  // GetStatus calls to the server (RendezvousHandler::ResolveVerdict).
  void ResolveVerdict(std::optional<rdzv::VerdictSummary> local,
                      std::function<void(std::optional<rdzv::VerdictSummary>)> done) override;
  void SetFailureVerdict(const rdzv::VerdictSummary& verdict) override { failure_verdict_ = verdict; }
  // From a Closed{failed_exit} pushed while joining or running.
  void OnRunFailed(RunFailedCallback cb) override { on_run_failed_ = std::move(cb); }

 private:
  // ResolveVerdict's last resort: one GetStatus, then verdict_done_.
  void AskVerdict(std::optional<rdzv::VerdictSummary> local);
  static constexpr std::chrono::seconds kVerdictAskTimeout{2};
  std::string unhealthy_report_;  // Shutdown(kUnhealthy)'s Leave carries it
  using Phase = RemotePhase;

  // One update of the Join stream: one handler per alternative.
  void OnUpdate(const rdzv::Update& update);
  void Handle(const rdzv::Admitted& admitted);
  void Handle(const rdzv::RoundComplete& complete);
  void Handle(const rdzv::RestartRequested& restart);
  void Handle(const rdzv::Rejected& rejected);
  void Handle(const rdzv::TimedOut& timed_out);
  void Handle(const rdzv::Evicted& evicted);
  void Handle(const rdzv::Closed& closed);
  void Handle(const rdzv::PreemptNotice& notice);
  // The Round a RoundComplete gives this node (its group rank, the workers'
  // MASTER_ADDR:MASTER_PORT); Internal when the round is malformed or
  // leaves this node out.
  Result<Round> RoundFrom(const rdzv::RoundComplete& complete) const;
  void OnStreamEnd(const Status& status);
  // One ReportFailure call (at most kMaxFailuresPerReport failures).
  void SendFailures(int round, const std::string& host, const std::vector<rdzv::WorkerFailureInfo>& failures);
  void Reconnect(const Status& why);
  void FinishJoin(Result<Round> result);
  void Changed(const std::string& why);
  void ArmKeepAlive();
  void ArmStatusLine();
  void ProbeTls();
  bool refused_ = false;  // the server refused this node (token, TLS, version)
  void ExitBarrier(std::function<void()> done);
  void EndBarrier(bool drained);

  boost::asio::io_context& io_;
  GrpcRendezvousOptions options_;
  std::shared_ptr<bool> alive_;  // false once destroyed: posted callbacks check it
  std::unique_ptr<rdzv::RendezvousClient> client_;
  std::unique_ptr<HostedServer> hosted_;
  boost::asio::steady_timer join_timer_;
  TimePoint join_deadline_{};  // when join_timer_ fires (the waiting line's "giving up in")
  boost::asio::steady_timer keep_alive_timer_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer barrier_timer_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer verdict_timer_;  // ResolveVerdict's wait for a Closed verdict
  std::function<void(std::optional<rdzv::VerdictSummary>)> verdict_done_;  // a ResolveVerdict waiting
  std::optional<rdzv::VerdictSummary> failure_verdict_;  // Shutdown(kFailed)'s Leave carries it
  std::optional<rdzv::VerdictSummary> closed_verdict_;   // a Closed{failed_exit}'s: the run's verdict
  RunFailedCallback on_run_failed_;
  rdzv::JoinArgs join_args_;  // of the current round's Join, re-sent on reconnect
  bool reconnecting_ = false;
  // Whether the last round had its store on the rendezvous port (logged
  // when that changes); nullopt before the first round.
  std::optional<bool> store_on_port_;
  bool heard_ = false;  // the server answered this Join (any update on its stream)
  bool keep_alive_failing_ = false;  // said once per streak of failed keep-alives
  Duration reconnect_delay_{};
  Phase phase_ = Phase::kIdle;
  std::function<void(Result<Round>)> pending_;
  ChangeCallback on_change_;
  StepSource step_source_;
  StragglerCallback on_straggler_;
  PreemptCallback on_preempt_;
  bool preempt_heard_ = false;  // a notice reached on_preempt_ (or this node sent its own)
  int reports_in_flight_ = 0;     // ReportFailures calls not answered yet
  std::function<void()> after_reports_;  // Shutdown's Leave, held until they are
  bool keep_alive_started_ = false;
  bool closed_ = false;
  uint64_t round_ = 0;
  std::function<void()> barrier_done_;
};

}  // namespace ctrun::launcher
