// PreemptEnv: the worker's side of ctrun's preemption notice, the parts
// that need no collective (the agreement is preempt_check.h). When
// preemption is on, ctrun exports to every worker:
//   CTRUN_PREEMPT_FILE        a path that does not exist at start; ctrun
//                             creates it (atomically) when a notice arrives.
//                             Only its existence matters to the worker.
//   CTRUN_PREEMPT_SAVED_FILE  this worker's marker: after the checkpoint of
//                             step S is durable on every rank, the worker
//                             writes "S\n" there, then exits 0.
// Unset (or empty) CTRUN_PREEMPT_FILE: preemption is off, nothing runs.
//
// Plain data and free functions, no torch; thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "trainer/comm/dist_env.h"

namespace ctrun::trainer {

struct PreemptEnv {
  std::string notice_file;  // CTRUN_PREEMPT_FILE; empty: preemption is off
  std::string saved_file;   // CTRUN_PREEMPT_SAVED_FILE; empty: no marker to write
  bool enabled() const { return !notice_file.empty(); }
};

// Reads CTRUN_PREEMPT_FILE and CTRUN_PREEMPT_SAVED_FILE (unset = empty).
PreemptEnv ReadPreemptEnv(const EnvLookup& env);

// True when something exists at `path` (the notice has arrived); false for
// an empty path.
bool PreemptNoticePresent(const std::string& path);

// Writes the decimal `step` and a newline to `path` (created or truncated),
// then closes it. OK without writing anything when `path` is empty;
// IOError naming the path when it cannot be written.
Status WritePreemptMarker(const std::string& path, int64_t step);

// Rank 0's lines: "preempted: saved step S in X.XX s", and
// "preemption notice at step S, but no --checkpoint-dir: nothing saved".
std::string PreemptSavedLine(int64_t step, double seconds);
std::string PreemptNothingSavedLine(int64_t step);

}  // namespace ctrun::trainer
