// FtFaultPoint: the fault injection the fault-tolerance tests use
// (tests/integration/test_ft.py, bench/ft.sh): CTRUN_FT_FAULT="R:S:POINT"
// makes local rank R of the worker group kill itself with SIGKILL at step S,
// at POINT:
//   train   before it trains step S (a rank dying mid-step);
//   vote    after step S's all-reduce, before it sends its vote (a kill
//           during the vote);
//   serve   while it sends its state before step S to a healing group,
//           the reply's header sent and the state not (a healing source
//           dying mid-transfer): ServeFault gives its healing server's send
//           hook.
// Only in the group's first attempt (TORCHELASTIC_RESTART_COUNT 0 or
// unset): the restarted workers run on. Unset or empty: no fault. A value
// that does not parse is an InvalidArgument naming the variable, so a test
// never runs without the fault it asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "trainer/ft/heal_server.h"

namespace ctrun::trainer::ft {

enum class FaultPoint { kTrain, kVote, kServe };

struct FtFault {
  int local_rank = 0;
  int64_t step = 0;
  FaultPoint point = FaultPoint::kTrain;
};

// CTRUN_FT_FAULT and TORCHELASTIC_RESTART_COUNT as given (null: unset).
Result<std::optional<FtFault>> ParseFtFault(const char* fault, const char* restart_count);

// Kills this process with SIGKILL when `fault` is for this local rank, step and point.
void MaybeFail(const std::optional<FtFault>& fault, int local_rank, int64_t step, FaultPoint point);

// The healing server's send hook for `fault` (empty unless its point is
// serve): it kills this process while it sends the state before the fault's
// step.
HealServer::SendHook ServeFault(const std::optional<FtFault>& fault, int local_rank);

// CTRUN_FT_HOLD="S:PATH": every rank waits before it trains step S until
// PATH exists (checked every 10 ms, for at most 300 s: then
// DeadlineExceeded), so a test can keep the survivors of a failure training
// until the restarted group has asked to join, and never race the end of
// the run. Every attempt holds (the step is passed once).
// CTRUN_FT_HOLD="join:PATH": a restarted group's workers (attempt > 0) wait
// before they first ask to join, so a test can make a group come back after
// the others finished. Unset or empty: none; a value that does not parse is
// InvalidArgument naming it.
struct FtHold {
  static constexpr int64_t kJoin = -1;  // `step` of a hold before joining
  int64_t step = 0;
  std::string path;
};
// `restart_count`: TORCHELASTIC_RESTART_COUNT (null: unset, the first attempt).
Result<std::optional<FtHold>> ParseFtHold(const char* hold, const char* restart_count = nullptr);
Status MaybeHold(const std::optional<FtHold>& hold, int64_t step);

// CTRUN_FT_STOP=PATH: before each step the worker reads PATH; once it holds
// a whole number S (written whole: a rename into place), the run ends when
// S steps are committed, as if --max-steps were S (bench/chaos.sh picks S
// a few steps ahead, so every group ends at the same step, when it chooses).
// `path` null or empty, or no file yet: nullopt. InvalidArgument naming the
// file when it holds anything else.
Result<std::optional<int64_t>> ReadFtStop(const char* path);

}  // namespace ctrun::trainer::ft
