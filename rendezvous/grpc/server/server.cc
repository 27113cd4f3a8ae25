// RendezvousServer and the lifecycle of its Impl (server_impl.h): start,
// restore from --state-dir, listen, the deadline timer, metrics and the runs'
// JSON, shutdown.
#include "rendezvous/grpc/server/server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <utility>

#include "rendezvous/grpc/net/grpc_process.h"
#include "rendezvous/grpc/server/server_impl.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/metrics/runs_json.h"
#include "rendezvous/persist/machine_snapshot.h"

namespace ctrun::rdzv {

namespace {

FtRuns::Limits FtLimits(const ServerOptions& options) {
  FtRuns::Limits limits;
  if (options.ft_max_groups) limits.max_groups = *options.ft_max_groups;
  return limits;
}

}  // namespace

RendezvousServer::Impl::Impl(const ServerOptions& options)
    : registry_(options.mode, options.closed_run_ttl),
      call_check_(options.token),
      ft_(mu_, call_check_, stopping_, timer_, FtLimits(options)),
      tls_(options.tls),
      sniff_deadline_(options.port_sniff_deadline.value_or(PortMux::kDefaultSniffDeadline)),
      stores_(mu_, options.serve_stores) {}

RendezvousServer::Impl::~Impl() { Shutdown(); }

Status RendezvousServer::Impl::AddRuns(const std::vector<FixedRun>& runs) {
  for (const FixedRun& run : runs) CTRUN_RETURN_IF_ERROR(registry_.Add(run.run_id, run.params));
  return Status::Ok();
}

Status RendezvousServer::Impl::RestoreRuns(const std::string& dir) {
  Result<StateStore> store = StateStore::Open(dir);
  if (!store.ok()) return store.status();
  const ClockPair now{Clock::now(), std::chrono::system_clock::now()};
  Result<std::vector<StoredRun>> runs = store->LoadAll(now);
  if (!runs.ok()) return runs.status();
  for (StoredRun& run : *runs) {
    ForgiveOutage(run.state, now.steady);
    Result<RendezvousMachine> machine = RendezvousMachine::Import(run.state);
    if (!machine.ok()) {
      return Status::InvalidArgument("state file " + store->PathOf(run.run_id) + ": " +
                                     machine.status().message() + " (move it out of --state-dir)");
    }
    CTRUN_RETURN_IF_ERROR(registry_.Add(run.run_id, run.state.params));
    **registry_.Find(run.run_id) = std::move(*machine);
    registry_.NoteStepped(run.run_id, now.steady);  // a closed, drained run: forgotten a TTL from now
    const Counts c = (*registry_.Find(run.run_id))->Tally();
    spdlog::info("rendezvous run '{}': resumed from {}: round {} {}, {} nodes", run.run_id,
                 store->PathOf(run.run_id), c.round,
                 c.closed ? "closed" : (c.complete ? "running" : "forming"), c.live_nodes);
  }
  states_.Keep(std::move(*store));
  return Status::Ok();
}

Status RendezvousServer::Impl::Listen(const HostPort& hp) {
  // The port is the mux's (port_mux.h): it binds it, and gRPC gets its
  // connections through an external-connection acceptor, with the server's
  // credentials (TLS too) and the client's real address.
  Result<std::unique_ptr<PortMux>> mux = PortMux::Bind(hp, sniff_deadline_);
  if (!mux.ok()) return mux.status();
  grpc::ServerBuilder builder;
  grpc_acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, ServerCredentialsFor(tls_));
  // Pings every connection with a call open, so a peer whose host is gone
  // without closing its connection (power loss, a partition) ends its calls
  // within ~10 s: an FtWatch's end is its group lost (ft_runs.h).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Fault-tolerance clients ping every 5 s while a call is open
  // (client/ft_client.cc): accept that, with room for timer skew; a peer pinging
  // faster than every second is still sent away after gRPC's default two
  // strikes.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  // The largest request a client sends is a LogBatch (at most 1 MiB,
  // convert/log_limits.h) or a ReportFailure (64 failures of at most ~10 KiB): a
  // message over 2 MiB is refused (RESOURCE_EXHAUSTED) before any handler or
  // token check sees it, instead of gRPC's default 4 MiB.
  builder.SetMaxReceiveMessageSize(2 << 20);
  builder.RegisterService(this);
  serve_queues_.AddTo(builder);
  logs_ = std::make_unique<LogHub>([this](const std::vector<std::string>& ids) { return RunsKnown(ids); });
  server_ = builder.BuildAndStart();
  if (!server_) {
    return Status::Unavailable("cannot listen on " + hp.host + ":" + std::to_string(hp.port) +
                               ": the gRPC server did not start (see the log above)");
  }
  ServeAsyncMethods();
  mux_ = std::move(*mux);
  port_ = mux_->port();
  address_ = hp.host + ":" + std::to_string(port_);
  stores_.Attach(mux_.get());
  mux_->Start(grpc_acceptor_.get(), [this](boost::asio::ip::tcp::socket socket, std::string first) {
    stores_.OnConnection(std::move(socket), std::move(first));
  });
  timer_thread_ = std::thread([this] { TimerLoop(); });
  return Status::Ok();
}

void RendezvousServer::Impl::ServeAsyncMethods() {
  // Calls kept requested per queue and method: each arrival requests the next.
  constexpr int kRequested = 16;
  serve_queues_.Serve([this](grpc::ServerCompletionQueue* cq, const std::function<void()>* again,
                             LiveCalls* live) { JoinStream::Request(this, cq, this, again, live); },
                      kRequested);
  serve_queues_.Serve([this](grpc::ServerCompletionQueue* cq, const std::function<void()>* again,
                             LiveCalls* live) { FtSyncCall::Request(this, cq, &ft_, again, live); },
                      kRequested);
  serve_queues_.Serve([this](grpc::ServerCompletionQueue* cq, const std::function<void()>* again,
                             LiveCalls* live) { FtWatchStream::Request(this, cq, &ft_, again, live); },
                      kRequested);
  serve_queues_.Start();
}

void RendezvousServer::Impl::Shutdown() {
  Outbox out;
  FtOutbox ft_out;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    streams_.EndAll(out);
    ft_.EndAll(ft_out);
    timer_.WakeAll();
  }
  out.Flush();
  ft_out.Flush();
  if (logs_) logs_->Shutdown();  // the followers end; no lock of ours is held
  if (timer_thread_.joinable()) timer_thread_.join();
  // No new connections, and the stores' sessions end with the mux thread.
  if (mux_) mux_->Stop();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }
  serve_queues_.Shutdown();  // after the server's: the calls left get their last operations back
}

void RendezvousServer::Impl::WhenDrained(const std::string& run_id, std::function<void()> cb) {
  Outbox out;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    ForgetDue(Clock::now(), out);
    streams_.AddDrainedWaiter(run_id, std::move(cb));
    CollectDrained(run_id, out);
  }
  out.Flush();
}

std::string RendezvousServer::Impl::MetricsText() {
  Outbox out;
  std::unique_lock<CheckedMutex> lock(mu_);
  ForgetDue(Clock::now(), out);
  std::vector<Metrics::RunNow> runs;
  for (const std::string& run_id : registry_.RunIds()) {
    const RendezvousMachine& machine = **registry_.Find(run_id);
    Metrics::RunNow r{run_id, machine.Tally(), 0, {}};
    if (r.counts.complete) {
      for (const Member& m : machine.State().members) r.world_size += m.local_world_size;
    }
    r.steps = steps_.Ranks(run_id);
    runs.push_back(std::move(r));
  }
  std::string text = metrics_.Render(runs);
  lock.unlock();
  out.Flush();
  return text;
}

std::string RendezvousServer::Impl::RunsJson() {
  Outbox out;
  std::unique_lock<CheckedMutex> lock(mu_);
  const TimePoint now = Clock::now();
  ForgetDue(now, out);
  std::vector<RunStatus> runs;
  for (const std::string& run_id : registry_.RunIds()) {
    const RendezvousMachine& machine = **registry_.Find(run_id);
    RunView view = ViewOf(machine.Export(), machine.Tally(), now);
    failures_.AddTo(run_id, now, view);
    runs.push_back(RunStatus{run_id, std::move(view), metrics_.History(run_id)});
  }
  std::string json = rdzv::RunsJson(runs, now);
  lock.unlock();
  out.Flush();
  return json;
}

void RendezvousServer::Impl::TimerLoop() {
  std::unique_lock<CheckedMutex> lock(mu_);
  while (!stopping_) {
    timer_.StartTurn();
    std::vector<std::string> due;
    TimePoint now = Clock::now();
    {
      Outbox forgotten;
      ForgetDue(now, forgotten);
      if (!forgotten.kicks.empty() || !forgotten.calls.empty()) {
        lock.unlock();
        forgotten.Flush();
        lock.lock();
        continue;
      }
    }
    timer_.Consider(registry_.NextForget());
    for (const std::string& run_id : registry_.RunIds()) {
      std::optional<TimePoint> next = (*registry_.Find(run_id))->NextDeadline();
      if (!next) continue;
      if (*next <= now) due.push_back(run_id);
      else timer_.Consider(next);
    }
    // The fault-tolerance runs (ft_runs.h): a due one is ticked on its own pass.
    if (std::optional<TimePoint> ft = ft_.NextDeadline(); ft && *ft <= now) {
      FtOutbox ft_out;
      ft_.Tick(now, ft_out);
      lock.unlock();
      ft_out.Flush();
      lock.lock();
      continue;
    } else {
      timer_.Consider(ft);
    }
    if (!due.empty()) {
      Outbox out;
      const Event tick = Tick{};
      for (const std::string& run_id : due) {
        StepRun(run_id, **registry_.Find(run_id), RunEvent{.event = tick, .now = now, .save = Save::kIfDecided},
                out);
      }
      lock.unlock();
      out.Flush();
      lock.lock();
      continue;
    }
    timer_.Sleep(lock, [this] { return stopping_; });
  }
}

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const ServerOptions& options) {
  Result<HostPort> hp = ParseListenAddress(options.listen_address);
  if (!hp.ok()) return hp.status();
  KeepCallbackQueueAlive();
  auto impl = std::make_unique<Impl>(options);
  CTRUN_RETURN_IF_ERROR(impl->AddRuns(options.runs));
  if (!options.state_dir.empty()) CTRUN_RETURN_IF_ERROR(impl->RestoreRuns(options.state_dir));
  CTRUN_RETURN_IF_ERROR(impl->Listen(*hp));
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(std::move(impl)));
}

RendezvousServer::RendezvousServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RendezvousServer::~RendezvousServer() { impl_->Shutdown(); }

int RendezvousServer::port() const { return impl_->port(); }

const std::string& RendezvousServer::address() const { return impl_->address(); }

void RendezvousServer::Shutdown() { impl_->Shutdown(); }

std::string RendezvousServer::MetricsText() { return impl_->MetricsText(); }

std::string RendezvousServer::RunsJson() { return impl_->RunsJson(); }

void RendezvousServer::WhenDrained(const std::string& run_id, std::function<void()> cb) {
  impl_->WhenDrained(run_id, std::move(cb));
}

}  // namespace ctrun::rdzv
