// Preemption (--preempt-grace): the pieces of one notice that are not the
// agent's state machine — its budget, the notice file the workers watch, and
// the verdict read from the workers' markers. The agent's side (when a notice
// begins, the deadline, the stop) is agent_machine_preempt.cc.
//
// The workers' channel (docs/preemption.md):
//   CTRUN_PREEMPT_FILE        <run log dir>/preempt: absent until a notice,
//                             then one JSON line {"deadline_unix_s", "budget_s",
//                             "source"}, written whole (tmp + rename).
//   CTRUN_PREEMPT_SAVED_FILE  <attempt dir>/<local rank>/preempt_saved: the
//                             worker writes the step it saved there, then
//                             exits 0.
//
// Pure functions but WriteNoticeFile, SavedCount and ReadVerdict (files);
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ctrun::launcher {

// One notice as the agent holds it and tells its workers.
struct WorkerNotice {
  std::string source;        // "SIGUSR1", or "node <addr> (SIGUSR1)" when a peer sent it
  double budget_s = 0;       // the time the workers got to save
  double deadline_unix_s = 0;
};

// The verdict of one notice: saved at `step`, or missed for `why`, or (no
// marker at all from workers that all exited 0) the workers finished the
// job during the notice.
struct PreemptVerdict {
  bool saved = false;
  bool finished = false;
  long long step = -1;  // saved only
  std::string why;      // missed only: one plain-English clause
};

// Slurm's time limit keeps this much back from a notice's budget: the
// workers must be gone before Slurm's own kill.
inline constexpr double kSlurmMarginS = 10;

// The budget of a notice received at `now_unix_s`: `grace`, and at most
// what is left of `slurm_end_unix_s` (when known) less kSlurmMarginS; never
// below 0.
double PreemptBudget(double grace_s, std::optional<double> slurm_end_unix_s, double now_unix_s);

// The notice file's one line (JSON, newline-terminated).
std::string NoticeLine(const WorkerNotice& notice);

// Writes NoticeLine(notice) to `path` whole: to `path`.tmp, then rename.
// IOError naming the path on failure.
Status WriteNoticeFile(const std::string& path, const WorkerNotice& notice);

// The line logged every few seconds while the workers save: `saved` of
// `workers` wrote their marker, `running` have not exited yet, the group is
// stopped in `stop_in_s`.
//   "waiting for the workers to save before the preemption: 1 of 2 saved,
//    2 still running; stopping them in 22 s"
std::string PreemptWaitingLine(int saved, int running, int workers, double stop_in_s);

// How many of `markers` (paths) exist: the workers that have saved.
int SavedCount(const std::vector<std::string>& markers);

// The verdict of a group whose workers all exited 0, from their markers
// (`markers`, by local rank): saved when every marker holds the same step
// (a decimal number, surrounding whitespace allowed); finished when none
// has one (the run ended within the notice); missed, naming the local ranks,
// when some are absent, unreadable or not a number, or when they differ.
PreemptVerdict ReadVerdict(const std::vector<std::string>& markers);

// ReadVerdict's rule over the markers' contents (nullopt: no marker).
PreemptVerdict VerdictOf(const std::vector<std::optional<std::string>>& contents);

}  // namespace ctrun::launcher
