#include "launcher/app/wiring.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "launcher/app/exit_on_failure.h"
#include "launcher/logs/log_dir.h"
#include "launcher/process/worker_env.h"
#include "launcher/rdzv/setup.h"

namespace ctrun::launcher {

Result<std::unique_ptr<Wiring>> Wiring::Start(ResolvedLaunch launch) {
  // The guard is forked first, while ctrun is still single-threaded.
  Result<std::unique_ptr<OrphanGuard>> guard = OrphanGuard::Start();
  if (!guard.ok()) return AsRunFailure(guard.status());
  return std::unique_ptr<Wiring>(new Wiring(std::move(launch), std::move(*guard)));
}

Status Wiring::Wire() {
  StoreHosting hosting;
  CTRUN_RETURN_IF_ERROR(HostStore(hosting));
  CTRUN_RETURN_IF_ERROR(MakeRendezvousHandler(hosting));
  CTRUN_RETURN_IF_ERROR(StartFt());
  return MakeAgent();
}

Wiring::Wiring(ResolvedLaunch launch, std::unique_ptr<OrphanGuard> guard)
    : launch_(std::move(launch)),
      guard_(std::move(guard)),
      reaper_(io_),
      workers_(io_, reaper_, guard_.get()),
      health_runner_(io_, reaper_, guard_.get()) {
  // From here on, every way out of main ends and reaps the guard (~OrphanGuard).
  OrphanGuard* guard_ptr = guard_.get();
  reaper_.Register(guard_ptr->pid(), [guard_ptr](pid_t, int, int64_t) {
    guard_ptr->Reaped();
    spdlog::warn("the orphan guard exited; workers will still die with ctrun (PDEATHSIG), "
                 "but their own children may not");
  });
  if (launch_.user_nofile) {
    workers_.SetChildOpenFilesLimit(*launch_.user_nofile);
    health_runner_.SetChildOpenFilesLimit(*launch_.user_nofile);
  }
}

Wiring::~Wiring() = default;

// The workers' store is bound before any rendezvous or worker: a port
// that is taken fails the launch here, once, and never a restart.
Status Wiring::HostStore(StoreHosting& hosting) {
  const LaunchConfig& config = launch_.config;
  hosting.agent_store = !config.no_agent_store;
  const std::optional<int> port = AgentStorePort(config);
  if (!port) return Status::Ok();
  store_ = std::make_unique<rdzv::StoreServer>(io_);
  CTRUN_RETURN_IF_ERROR(store_->Listen(AgentStoreHost(config), *port));
  hosting.port = store_->port();
  spdlog::debug("hosting the workers' store on port {}", store_->port());
  return Status::Ok();
}

Status Wiring::MakeRendezvousHandler(const StoreHosting& hosting) {
  Result<std::unique_ptr<RendezvousHandler>> rdzv =
      MakeRendezvous(io_, launch_.config, launch_.env, hosting);
  if (!rdzv.ok()) return rdzv.status();
  rdzv_ = std::move(*rdzv);
  return Status::Ok();
}

// Before the Agent, which copies the environment its workers get.
Status Wiring::StartFt() {
  if (!launch_.config.ft) return Status::Ok();
  Result<std::unique_ptr<FtRuntime>> ft = StartFaultTolerance(io_, launch_.config, launch_.env, launch_.events.get());
  if (!ft.ok()) return ft.status();
  ft_ = std::move(*ft);
  for (const auto& [name, value] : ft_->worker_env()) launch_.env[name] = value;
  return Status::Ok();
}

Status Wiring::MakeAgent() {
  const LaunchConfig& config = launch_.config;
  Result<RunLogDir> log_dir = RunLogDir::Create(config.log_dir, config.rdzv_id);
  if (!log_dir.ok()) return AsUsageError(log_dir.status());
  if (config.health_check) {
    Environment check_env = launch_.env;
    check_env["CTRUN_LOG_DIR"] = log_dir->path();  // scripts/health-check.sh tests that it is writable
    health_ = std::make_unique<CommandHealthCheck>(
        io_, health_runner_, *config.health_check,
        ToDuration(config.health_check_timeout), ToEnvStrings(check_env));
  }
  agent_ = std::make_unique<Agent>(io_, config, launch_.env, *rdzv_, workers_, std::move(*log_dir),
                                   store_.get(), launch_.events.get());
  agent_->SetWorkerBindings(std::move(launch_.bindings));
  agent_->SetHealthCheck(health_.get());
  if (ft_) agent_->SetRoundObserver([ft = ft_.get()](const Round& round) { ft->OnRound(round.group_rank); });
  return Status::Ok();
}

int Wiring::Run() {
  agent_->Start();
  io_.run();
  guard_->HandOverAtExit();
  guard_->Stop();  // ctrun never exits before its guard
  return agent_->exit_code();
}

}  // namespace ctrun::launcher
