// RendezvousServer::Impl: the service behind RendezvousServer (server.h has
// the behaviour). Internal to rendezvous/grpc/server. A composition: the
// state lives in owner classes, each with its header, and Impl steps the
// runs' machines and routes their decisions between them:
//   ServerTimer   (server_timer.h)  when the timer thread wakes
//   NodeStreams   (node_streams.h)  the nodes' Join streams, WhenDrained's waiters
//   StepReports   (step_reports.h)  keep-alives' step reports: stragglers
//   RunFailures   (run_failures.h)  failures for `ctrun status --why`
//   RunStores     (run_stores.h)    the workers' c10d stores on the listen port
//   RunStates     (run_states.h)    --state-dir: the runs' states on disk
//   FtService     (ft_service.h)    the fault-tolerance calls FtSync, FtWatch, FtLeave
//   LogHub        (log_hub.h)       the shared logs (logs_calls.cc admits their calls)
//   CallCheck     (call_check.h)    token and version
// Impl's own definitions are cut by concept:
//   server.cc          lifecycle: start, listen, shut down, timer, metrics
//   service_calls.cc   the RPC handlers and the end of a Join stream
//   preempt_call.cc    Preempt: a node's preemption notice to the others
//   failure_call.cc    ReportFailure: a node's failed workers, for `ctrun status --why`
//   run_step.cc        StepRun: one event through a run's machine to the wire
//   resume.cc          a Join that re-opens a broken stream
//   logs_calls.cc      the shared logs: ShipLogs, ReadLogs (log_hub.h serves them)
//
// Locking: mu_ guards the members marked so, the owners' state included
// (none has a lock of its own, but LogHub and CallCheck). The functions
// grouped below as requiring mu_ check it on entry
// (CheckedMutex::AssertHeld). gRPC calls on streams are made with no lock
// held (Outbox::Flush).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/convert/reconnect.h"
#include "rendezvous/grpc/net/listen_address.h"
#include "rendezvous/grpc/net/port_mux.h"
#include "rendezvous/grpc/server/call_check.h"
#include "rendezvous/grpc/server/checked_mutex.h"
#include "rendezvous/grpc/server/ft_service.h"
#include "rendezvous/grpc/server/join_stream.h"
#include "rendezvous/grpc/server/log_hub.h"
#include "rendezvous/grpc/server/node_streams.h"
#include "rendezvous/grpc/server/run_failures.h"
#include "rendezvous/grpc/server/run_states.h"
#include "rendezvous/grpc/server/run_stores.h"
#include "rendezvous/grpc/server/serve_queues.h"
#include "rendezvous/grpc/server/server.h"
#include "rendezvous/grpc/server/server_timer.h"
#include "rendezvous/grpc/server/step_reports.h"
#include "rendezvous/metrics/metrics.h"
#include "rendezvous/persist/state_store.h"

namespace ctrun::rdzv {

// Join is a raw async method (serialized bytes both ways, served on
// join_queues.h's queues): the request is parsed here, and the stream carries
// serialized Updates (join_stream.h). The other methods are callbacks.
class RendezvousServer::Impl final : public AsyncService,
                                     public StreamOwner {
 public:
  explicit Impl(const ServerOptions& options);
  ~Impl() override;

  // Adds the fixed runs. InvalidArgument for invalid params or a repeated id.
  Status AddRuns(const std::vector<FixedRun>& runs);

  // Resumes the runs kept in `dir` (ctrund --state-dir) and keeps writing
  // there. Errors as RendezvousServer::Start says for state_dir.
  Status RestoreRuns(const std::string& dir);

  // Binds `hp`, starts serving and the timer thread. Unavailable naming the
  // address and the reason when it cannot be bound.
  Status Listen(const HostPort& hp);
  // Serves Join, FtSync and FtWatch on serve_queues_ and starts them (the
  // gRPC server runs).
  void ServeAsyncMethods();

  // As RendezvousServer's methods of the same names.
  void Shutdown();
  void WhenDrained(const std::string& run_id, std::function<void()> cb);
  int port() const { return port_; }
  const std::string& address() const { return address_; }
  std::string MetricsText();
  std::string RunsJson();

  // StreamOwner: a node's current stream that its client dropped is taken
  // as the node gone (see server.h).
  void StreamDone(JoinStream* stream) override;

  // v1::Rendezvous (service_calls.cc).
  // StreamOwner: a Join call arrived on `stream` (a ServeQueues thread).
  void JoinArrived(JoinStream* stream) override;
  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext* context, const v1::KeepAliveRequest* request,
                                      v1::KeepAliveReply* reply) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context, const v1::LeaveRequest* request,
                                  v1::LeaveReply* reply) override;
  grpc::ServerUnaryReactor* GetState(grpc::CallbackServerContext* context, const v1::StateRequest* request,
                                     v1::StateReply* reply) override;
  // preempt_call.cc.
  grpc::ServerUnaryReactor* Preempt(grpc::CallbackServerContext* context, const v1::PreemptRequest* request,
                                    v1::PreemptReply* reply) override;
  // failure_call.cc.
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::ReportFailureRequest* request,
                                          v1::ReportFailureReply* reply) override;

  // The fault-tolerance calls (ft_service.h; ft_runs.h has their semantics):
  // FtSync and FtWatch are async methods on serve_queues_.
  grpc::ServerUnaryReactor* FtLeave(grpc::CallbackServerContext* context, const v1::FtLeaveRequest* request,
                                    v1::FtLeaveReply* /*reply*/) override {
    return ft_.Leave(context, request);
  }

  // The shared logs (logs_calls.cc; log_hub.h has their semantics).
  grpc::ServerReadReactor<v1::LogBatch>* ShipLogs(grpc::CallbackServerContext* context,
                                                  v1::ShipLogsReply* reply) override;
  grpc::ServerWriteReactor<v1::LogLines>* ReadLogs(grpc::CallbackServerContext* context,
                                                   const v1::ReadLogsRequest* request) override;

 private:
  // When StepRun writes the run's state (with --state-dir).
  enum class Save {
    kAlways,     // the event may change the state even with no decision (join, leave)
    kIfDecided,  // only when the step decided something (keep-alive, tick)
  };
  // What StepRun does with a Rejected addressed to the stepping node.
  enum class OwnRejection {
    kRoute,        // route it like every other decision (Join: it ends the new stream)
    kReturn,       // return it instead of routing it; route the others (KeepAlive's reply)
    kReturnAlone,  // return it and route nothing (a reconnecting Join)
  };
  // One event for StepRun (held by value: callers build it from temporaries).
  // `caller` and `caller_stream` must outlive the call.
  struct RunEvent {
    Event event;
    TimePoint now;
    Save save = Save::kAlways;
    const NodeId* caller = nullptr;       // the node that sent the event, if one did
    JoinStream* caller_stream = nullptr;  // its new Join stream (Join only)
    OwnRejection own_rejection = OwnRejection::kRoute;
  };
  struct StepOutcome {
    bool caller_rejected = false;          // kRoute: the caller's Join was rejected
    std::optional<Rejected> own_rejection;  // kReturn, kReturnAlone: the caller's rejection
  };

  // run_step.cc; each requires mu_.
  //
  // The one path of every event: steps `ev` on `machine` (the run `run_id`),
  // writes the state (RunStates::Save; per ev.save), routes the decisions (Route;
  // the caller's own rejection per ev.own_rejection) and re-arms the timer
  // (Rearm). With kReturnAlone and a rejection, returns it before routing or
  // re-arming anything.
  StepOutcome StepRun(const std::string& run_id, RendezvousMachine& machine, const RunEvent& ev, Outbox& out);
  // Queues each decision on its addressees' streams. In a Join step
  // (`joiner` set), the joiner's answer and everything after it for that
  // node go to `joiner_stream`; earlier ones (deadlines applied before the
  // Join) go to its old stream. Returns whether the joiner was rejected.
  bool Route(const std::string& run_id, const std::vector<Decision>& decisions, const NodeId* joiner,
             JoinStream* joiner_stream, Outbox& out);
  // Moves the WhenDrained callbacks of `run_id` into `out` once the run holds
  // no live node.
  void CollectDrained(const std::string& run_id, Outbox& out);
  // Wakes the timer if `machine` now has a deadline, or a run is now to be
  // forgotten, before the time it sleeps until.
  void Rearm(const RendezvousMachine& machine);
  // Forgets every run whose closed_run_ttl has passed at `now`
  // (RunRegistry::ForgetDue), and all the server keeps of it besides its
  // machine: streams (ended), straggler detector, metrics and history,
  // drained waiters (run), its store and its --state-dir file. Called at
  // the start of every locked section that looks a run up, never between
  // a lookup and the use of its machine.
  void ForgetDue(TimePoint now, Outbox& out);

  // resume.cc; each requires mu_.
  //
  // A Join that re-opens a broken stream (reconnect.h). Answers it and
  // returns true when the node is a member of the running round (the rank
  // table again, stepped as a keep-alive) or, for kRunning, when it is not
  // (RestartRequested); false when the Join is to be stepped as usual.
  bool Resume(const std::string& run_id, const rdzv::Join& join, Reconnect mode, JoinStream* stream, Outbox& out);
  // For a node that was a member before this step: steps the Join as a
  // keep-alive and, when the node is still a member, sends it the rank table
  // again and makes `stream` its stream. True when the Join is answered (the
  // rank table, or the keep-alive's rejection, which ends the stream).
  bool ResumeMember(const std::string& run_id, RendezvousMachine& machine, const rdzv::Join& join,
                    JoinStream* stream, Outbox& out);
  // A kRunning reconnect from a node that is not a member of the running
  // round (`machine` null for an unknown run): a stale Join ends quietly, a
  // closed run says Closed, otherwise the node is asked to restart and
  // `stream` becomes its stream.
  void ResumeNonMember(const std::string& run_id, const RendezvousMachine* machine, const rdzv::Join& join,
                       JoinStream* stream, Outbox& out);

  // service_calls.cc; each requires mu_.
  //
  // Steps a Join that is not a reconnect: the run is found (or, in
  // kAutoCreate, created from the request's params) and `stream` becomes the
  // node's stream unless the Join is rejected.
  void StepJoin(const v1::JoinRequest& request, const rdzv::Join& join, JoinStream* stream, Outbox& out);
  // A unary call's locked part: when `status` is OK, takes mu_, forgets the
  // due runs and, when the run is usable (Usable; else `status` says why),
  // calls `step(machine, now, out)`; then does the gRPC work queued in `out`
  // with the lock released. Takes mu_.
  template <class Step>
  void WithUsableRun(const std::string& run_id, grpc::Status& status, Step step) {
    Outbox out;
    if (status.ok()) {
      std::lock_guard<CheckedMutex> lock(mu_);
      const TimePoint now = Clock::now();
      ForgetDue(now, out);
      Result<RendezvousMachine*> machine = Usable(run_id, status);
      if (machine.ok()) step(**machine, now, out);
    }
    out.Flush();
  }
  // The machine for a unary call, or the error in `status` (UNAVAILABLE
  // while stopping, NOT_FOUND for an unknown run, worded for `asker`).
  Result<RendezvousMachine*> Usable(const std::string& run_id, grpc::Status& status,
                                    RunRegistry::Asker asker = RunRegistry::Asker::kNode);
  // A query's run (GetState, ReadLogs; requires mu_): `run_id`, or with
  // `only_run` and no id the one run served (NOT_FOUND in `status`
  // naming the runs otherwise).
  std::string QueryRun(const std::string& run_id, bool only_run, grpc::Status& status);

  // logs_calls.cc; each takes mu_ (never called with the hub's lock held).
  //
  // The token and version check and a run this server holds (NOT_FOUND
  // otherwise), for a log call.
  // `run_id` may be resolved (ReadLogs' only_run: the one run served;
  // QueryRun).
  grpc::Status AdmitLogCall(const grpc::CallbackServerContext& context, v1::ProtocolVersion version,
                            const std::string& token, std::string& run_id, bool only_run = false,
                            RunRegistry::Asker asker = RunRegistry::Asker::kNode);
  // Whether each run is still held (LogHub drops the logs of the others).
  std::vector<bool> RunsKnown(const std::vector<std::string>& run_ids);

  // The timer thread: steps Tick{} on each run whose NextDeadline() is due,
  // then sleeps until the earliest one or until Rearm or Shutdown wakes it.
  void TimerLoop();

  mutable CheckedMutex mu_;
  bool stopping_ = false;            // guarded by mu_
  ServerTimer timer_{mu_};           // when TimerLoop wakes
  RunRegistry registry_;             // guarded by mu_
  Metrics metrics_;                  // guarded by mu_
  StepReports steps_;                // keep-alives' step reports; guarded by mu_
  RunFailures failures_;             // `ctrun status --why`; guarded by mu_
  NodeStreams streams_;              // the nodes' Join streams, WhenDrained's waiters; guarded by mu_
  RunStates states_;                 // --state-dir's files; written under mu_

  CallCheck call_check_;
  FtService ft_;  // the fault-tolerance calls
  // The shared logs; made in Listen, shut down before the gRPC server (and
  // destroyed after it: declared before server_).
  std::unique_ptr<LogHub> logs_;
  const TlsConfig tls_;
  const std::chrono::milliseconds sniff_deadline_;  // the mux's (ServerOptions::port_sniff_deadline)
  int port_ = 0;
  std::string address_;
  // Destroyed in reverse: the gRPC server first (nothing posts to the mux
  // after it), then the stores (the mux thread is stopped by then), then
  // the mux and its io_context.
  std::unique_ptr<PortMux> mux_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> grpc_acceptor_;
  RunStores stores_;  // the workers' stores on the port (run_stores.h)
  ServeQueues serve_queues_;  // shut down after the server, destroyed after it
  std::unique_ptr<grpc::Server> server_;
  std::thread timer_thread_;
};

}  // namespace ctrun::rdzv
