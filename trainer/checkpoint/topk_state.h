// Top-k compression's state in a checkpoint (Deep Gradient Compression,
// topk_compression.h; DDP's TopkState, ddp.h). Error feedback is local: each
// rank keeps its own momentum u and residual v, so each rank writes its own
// file, beside the DDP checkpoint (checkpoint.h) in the same directory:
//
//   <dir>/topk/step-<N>/rank-<r>.pt   a torch archive: "meta/step" (N),
//       "meta/rank", "meta/world_size", "meta/synced_steps" (the warm-up's
//       count), "meta/count" (parameters), and per parameter that requires
//       grad "u/<name>" and "v/<name>" (float32, shaped like it).
//
// Commit (the caller's order, as ctrun-fashion-mnist does it): every rank
// writes its file for step N (atomically: <path>.tmp, then rename), the
// ranks agree that all writes succeeded, then rank 0 writes checkpoint.pt,
// the commit point, and only then removes step directories older than N.
// A crash before the commit leaves the previous checkpoint.pt with its own,
// still present, step directory: new weights never pair with old top-k state
// or the reverse. The step in checkpoint.pt names the directory to read.
//
// Resume (ResumeTopkState):
//  - at the world size that saved it: every rank loads its own file; the
//    training goes on exactly (bitwise) as without the interruption;
//  - at another world size: per-rank residuals cannot map 1:1. Every new
//    rank starts from the MEAN over the old ranks' u and v. The averaged
//    update the residuals still owe, sum(v) / world, and the mean momentum
//    are kept, so no gradient mass is lost; the warm-up count is kept too;
//  - no step directory (saved without top-k, or removed): zero state and the
//    warm-up counted from 0 again.
// A missing rank file or a corrupt, truncated or mismatched one is
// InvalidArgument, one line naming the file.
//
// Free functions; the state's tensors are borrowed for the call.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "base/status.h"
#include "trainer/parallel/ddp.h"

namespace ctrun::trainer {

// <dir>/topk/step-<step>
std::string TopkStateDir(const std::string& dir, int64_t step);
// <dir>/topk/step-<step>/rank-<rank>.pt
std::string TopkStatePath(const std::string& dir, int64_t step, int rank);

// Writes `state` (this rank's; `rank` of `world`, at checkpoint `step`) to
// `path` atomically, creating its directory. OK, or IOError naming the file.
Status SaveTopkState(const TopkState& state, const std::string& path, int64_t step, int rank, int world);

// Reads the file at `path` and checks it: it must say `step`, `rank` and
// `world`, and hold a tensor for every name of `like` with its shape (and
// nothing else). Returns the file's state (new tensors, not views), or
// InvalidArgument naming the file when it is missing, unreadable (corrupt or
// truncated) or does not match.
Result<TopkState> ReadTopkState(const std::string& path, int64_t step, int rank, int world,
                                const TopkState& like);

// What ResumeTopkState did, and the plain-English line rank 0 prints.
struct TopkResume {
  enum Kind { kNoState, kExact, kMean } kind = kNoState;
  std::string line;
};

// Restores `into` (views of DDP's state, ddp.h) from the checkpoint in `dir`
// at `step`, saved by `saved_world` ranks, for rank `rank` of `world`, as the
// header says; the caller then sets DDP's warm-up count from
// into.synced_steps. On error nothing in `into` changes.
Result<TopkResume> ResumeTopkState(const std::string& dir, int64_t step, int saved_world, int rank, int world,
                                   TopkState& into);

// After the checkpoint at `step` is committed: removes <dir>/topk/step-<N>
// for every N < `step` (rank 0). Best effort: a directory that cannot be
// removed is left.
void RemoveOldTopkStates(const std::string& dir, int64_t step);

}  // namespace ctrun::trainer
