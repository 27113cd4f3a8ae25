// Attempt: one started worker group of the agent, and everything that lives
// exactly as long as it — made in Agent::StartWorkers (the shell of the AgentMachine), destroyed when its stop
// has drained (the group closed, every tee at end-of-file). Outside an
// attempt the agent holds none of this, so no per-attempt field can be stale.
//
// AttemptTees: the attempt's output tees and the filtered logs they write to
// (and, with --dedup-logs, the ConsoleDedups they pass console lines to;
// those write what they hold once every tee has reached its end-of-file).
// Its tees may still have cancelled reads queued on the io_context when the
// attempt ends, so the agent keeps the ended attempt's AttemptTees (inert:
// every pipe closed, every on_eof run) until the next attempt starts or the
// agent goes.
//
// Ownership: owns everything here. Thread model: the agent's io_context
// thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "launcher/report/failure_report.h"
#include "launcher/agent/worker_specs.h"
#include "launcher/health/exclusion_request.h"
#include "launcher/liveness/watch.h"
#include "launcher/logs/console_dedup.h"
#include "launcher/logs/filtered_log.h"
#include "launcher/report/report.h"
#include "launcher/logs/stream_tee.h"
#include "launcher/process/worker_env.h"
#include "launcher/rdzv/rendezvous_handler.h"

namespace ctrun::launcher {

class AttemptTees {
 public:
  AttemptTees() = default;
  AttemptTees(const AttemptTees&) = delete;
  AttemptTees& operator=(const AttemptTees&) = delete;

  // Opens the plan's filtered logs (one that cannot be made is a warning; the
  // job goes on without it) and starts a tee per planned stream whose pipe
  // (`pipes`: per worker, stdout and stderr read ends; -1 none) is open.
  // `on_eof` runs after each tee's end-of-file, once open() has dropped.
  void Start(boost::asio::io_context& io, const TeePlan& plan, const std::vector<std::pair<int, int>>& pipes,
             std::function<void()> on_eof);
  // Tees whose end-of-file has not come yet.
  int open() const { return open_; }
  // Takes what each pipe holds now and finishes every tee (the workers are
  // gone). Each tee's on_eof may end the attempt: the tees stay alive.
  void DrainAll();
  // The last lines worker `worker` (its index in the plan) wrote on stderr,
  // oldest first, when its stderr is piped (--tee, --share-logs,
  // --dedup-logs, --duplicate-stderr-filters); empty otherwise. For the
  // failure report of a worker that wrote no error file.
  std::vector<std::string> StderrTail(size_t worker) const;

 private:
  void FlushDedup();  // the ConsoleDedups' held lines to the console
  void StartTee(boost::asio::io_context& io, const TeeStream& stream, int pipe_fd, FilteredLog* filtered,
                const std::function<void()>& on_eof);

  // Declared before tees_, which borrow them: destroyed after.
  std::unique_ptr<FilteredLog> filtered_stdout_;
  std::unique_ptr<FilteredLog> filtered_stderr_;
  std::unique_ptr<ConsoleDedup> dedup_stdout_;  // --dedup-logs only
  std::unique_ptr<ConsoleDedup> dedup_stderr_;
  // By worker (null where stderr is not piped); the tees write to them, so
  // declared before tees_.
  // Each holds the stream's last bytes only; lines are split when a report
  // asks (StderrTail), so a busy stderr costs a copy per read, not a string
  // per line.
  std::vector<std::unique_ptr<std::string>> stderr_tails_;
  std::vector<std::unique_ptr<StreamTee>> tees_;
  LogShipper* shipper_ = nullptr;  // --share-logs: the agent's, which outlives the tees
  int open_ = 0;
};

struct Attempt {
  Round round;
  std::vector<WorkerRanks> ranks;  // this node's ranks in `round`, by local rank
  std::vector<std::pair<int, int>> pipes;  // per worker, stdout and stderr read ends (-1 none)
  std::vector<WorkerExit> exits;   // by local rank: how each exited, once it has
  std::vector<WorkerFailure> failures;  // this attempt's failed workers, as seen
  std::vector<FailureContext> failure_contexts;  // by index into failures (failure_report.h)
  // The workers' memory cgroup's OOM kill count file (oom_kills.h) and its
  // count when they started; nullopt when unreadable.
  std::optional<std::string> oom_file;
  std::optional<int64_t> oom_kills_at_start;
  // Pointer-stable: outlives the attempt (see above).
  std::unique_ptr<AttemptTees> tees = std::make_unique<AttemptTees>();
  // --heartbeat-timeout: set from the start until the stop begins; null when off.
  std::unique_ptr<HeartbeatWatch> heartbeat;
  // CTRUN_EXCLUDE_NODE_FILE: armed before the workers start.
  std::unique_ptr<ExclusionWatch> exclusion;
};

}  // namespace ctrun::launcher
