// The agent's verdict on a failed end, and a peer's failure
// (--kill-on-bad-exit): launcher/agent/agent.h's diagram.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "base/text_match.h"
#include "launcher/agent/agent.h"
#include "launcher/report/failure_report.h"
#include "launcher/net/local_address.h"

namespace ctrun::launcher {

void Agent::FinishFailed(int code, ShutdownReason reason) {
  // Final from here: a signal changes nothing while the verdict is settled.
  state_ = State::kFailed;
  exit_code_ = code;
  const std::optional<rdzv::VerdictSummary> local = last_report_ ? LocalVerdict(*last_report_) : std::nullopt;
  auto conclude = [this, code, reason](std::optional<rdzv::VerdictSummary> verdict) {
    if (peer_verdict_) verdict = peer_verdict_;  // the node that closed the run said it first
    verdict_ = std::move(verdict);
    if (verdict_) {
      spdlog::error("{}", Printable(verdict_->line));
      if (reason == ShutdownReason::kFailed) rdzv_.SetFailureVerdict(*verdict_);
    }
    Finish(State::kFailed, code, reason);
  };
  if (peer_verdict_) return conclude(peer_verdict_);
  rdzv_.ResolveVerdict(local, std::move(conclude));
}

void Agent::FailToStart(const Round& round, const std::string& error) {
  std::vector<int> ranks;
  for (const WorkerRanks& r : attempt_->ranks) ranks.push_back(r.rank);
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  last_report_ = ExecFailureReport(round.round, HostName(), ranks, error, now_s);
  rdzv_.ReportFailures(*last_report_);
  attempt_.reset();
  FinishFailed(kExitFailure, ShutdownReason::kFailed);
}

void Agent::OnPeerFailed(const std::optional<rdzv::VerdictSummary>& verdict) {
  if (peer_failed_) return;
  peer_failed_ = true;
  peer_verdict_ = verdict;
  const std::string what = verdict ? ": " + Printable(verdict->line) : std::string();
  if (events_) {
    events_->Emit("peer_failed", nlohmann::ordered_json{{"verdict", verdict ? verdict->line : std::string()},
                                                        {"state", StateName(state_)},
                                                        {"kill_on_bad_exit", config_.kill_on_bad_exit}});
  }
  if (!config_.kill_on_bad_exit) {
    spdlog::warn("another node failed for good and closed the run{}; the workers run on (--kill-on-bad-exit 0)",
                 what);
    return;
  }
  switch (state_) {
    case State::kRunning: {
      if (preempt_) {
        spdlog::info("another node failed for good during the preemption save{}; the workers go on saving", what);
        return;
      }
      if (attempt_ && attempt_->failed_early) {
        // A worker failed in its first second: the group stops when that
        // second ends (at most 1 s away), so that a bad launch is told
        // from one rank's failure on this node too (StopForFailure).
        spdlog::error("another node failed for good and closed the run{}; stopping the workers at the end of "
                      "their first second",
                      what);
        return;
      }
      spdlog::error("another node failed for good and closed the run{}; stopping the workers", what);
      const Duration grace = std::min<Duration>(ToDuration(config_.shutdown_grace), kPeerFailedGrace);
      StopGroup(SIGTERM, Stop::ToPeerFailed(), grace);
      return;
    }
    case State::kStopping:
      // A restart under way would join a closed run: end with the peer's
      // failure instead. Other stops (a signal, an unhealthy leave, a
      // preemption, success) keep their end.
      if (stop_->then == Stop::Then::kRestart) {
        spdlog::error("another node failed for good and closed the run{}; not restarting", what);
        stop_->then = Stop::Then::kPeerFailed;
      }
      return;
    case State::kBackoff:
      backoff_timer_.cancel();
      spdlog::error("another node failed for good and closed the run{}; not restarting", what);
      FinishFailed(kExitFailure, ShutdownReason::kFailed);
      return;
    case State::kInit:
    case State::kRendezvous:  // the join is refused: OnRound ends with this verdict
    case State::kSucceeded:
    case State::kFailed:
      return;
  }
}

}  // namespace ctrun::launcher
