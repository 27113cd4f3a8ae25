// ApplyFtDecision: the end of one --ft step in both example programs
// (fashion_mnist_ft.cc, gpt_ft.cc) — the ballot's decision applied and the
// line the worker logs for it: on a commit, `apply` runs (the optimizer
// step, and --ft-exact's Commit) and `committed` advances,
//   "ft step <step> quorum <id> replicas <n> loss <loss>";
// on no commit nothing changes,
//   "ft discard step <step> quorum <id>: <why>"
// where why is "another member voted no" when this member's ballot was yes,
// else this member's last failure (FtReplica::last_failure).
//
// No I/O of its own; `apply` does the work. Thread model: the worker's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trainer/ft/ft_replica.h"

namespace ctrun::trainer {

// `plan` is the plan the step ran under; `loss` this member's loss;
// `voted_yes` its ballot.
std::string ApplyFtDecision(const ft::FtDecision& decision, const ft::FtPlan& plan, double loss, bool voted_yes,
                            const ft::FtReplica& replica, int64_t& committed, const std::function<void()>& apply);

}  // namespace ctrun::trainer
