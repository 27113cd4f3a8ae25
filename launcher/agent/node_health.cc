// The agent and node health (launcher/agent/agent.h's "Node health"): the
// check before every join and while the workers run, a worker's exclusion
// request, the unhealthy leave.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>

#include "launcher/agent/agent.h"
#include "launcher/report/failure_report.h"
#include "launcher/logs/stream_tee.h"
#include "launcher/net/local_address.h"

namespace ctrun::launcher {

namespace {

using Json = nlohmann::ordered_json;

}  // namespace

void Agent::OnPreJoinCheck(const HealthResult& result) {
  if (state_ != State::kRendezvous) return;  // a signal ended the wait
  if (!result.healthy) {
    LeaveUnhealthy(ReportFailedCheck(result, "rendezvous", "; this node does not join: it leaves the job"));
    return;
  }
  rdzv_.NextRound([this](const Result<Round>& round) { OnRound(round); });
}

std::string Agent::ReportFailedCheck(const HealthResult& result, const char* during, const char* next) {
  const std::string report = FormatHealthReport(health_->command(), result);
  spdlog::error("health check '{}' {}{}", health_->command(), result.failure, next);
  if (events_) {
    events_->Emit("node_unhealthy", Json{{"source", "health_check"}, {"during", during},
                                         {"report", report}, {"last_lines", result.last_lines}});
  }
  return report;
}

void Agent::ArmHealthTimer() {
  if (!health_ || config_.health_check_interval <= Seconds(0)) return;
  health_timer_.expires_after(ToDuration(config_.health_check_interval));
  health_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || state_ != State::kRunning) return;
    health_->Run([this](const HealthResult& result) { OnPeriodicCheck(result); });
  });
}

void Agent::OnPeriodicCheck(const HealthResult& result) {
  if (state_ != State::kRunning) return;
  if (result.healthy) {
    ArmHealthTimer();
    return;
  }
  const std::string report =
      ReportFailedCheck(result, "running", "; stopping the workers: this node leaves the job");
  StopGroup(SIGTERM, Stop::ToLeaveUnhealthy(report));
}

void Agent::OnExclusionRequest(const std::string& reason) {
  const std::string report =
      "a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): " + reason;
  const bool running = state_ == State::kRunning;
  const bool restarting = state_ == State::kStopping && stop_->then == Stop::Then::kRestart;
  if (!running && !restarting) return;  // finishing anyway (success or a signal)
  spdlog::error("{}; stopping the workers: this node leaves the job", report);
  if (events_) {
    events_->Emit("node_unhealthy", Json{{"source", "exclusion_request"}, {"during", StateName(state_)},
                                         {"report", report}, {"last_lines", Json::array({reason})}});
  }
  if (running) {
    StopGroup(SIGTERM, Stop::ToLeaveUnhealthy(report));
  } else {
    // A worker failed just before (or because of) its request: the stop
    // under way is the node's exclusion, not a restart.
    stop_->then = Stop::Then::kLeaveUnhealthy;
    stop_->report = report;
  }
}

void Agent::StopHealthWatch() {
  health_timer_.cancel();
  if (health_) health_->Cancel();
}

// The node leaves for good; the rendezvous counts it against
// --max-unhealthy-nodes and a spare (or the survivors) takes over.
void Agent::LeaveUnhealthy(const std::string& report) {
  WriteAll(STDERR_FILENO, FormatUnhealthyBlock(HostName(), report));
  rdzv_.SetUnhealthyReport(report);
  Finish(State::kFailed, kExitNodeUnhealthy, ShutdownReason::kUnhealthy);
}

}  // namespace ctrun::launcher
