// The pipeline flags of ctrun-gpt checked together: --pp-schedule,
// --pp-virtual-stages, --micro-batches, --layers, --pp-split against the
// pp of --mesh. Pure; no torch, no I/O.
#pragma once

#include "base/result.h"
#include "trainer/apps/gpt_flags.h"

namespace ctrun::trainer {

// OK, or InvalidArgument: one line naming the flag and the fix when
// --pp-virtual-stages is above 1 without --pp-schedule interleaved, or
// interleaved has fewer than 2 chunks a stage, fewer than 2 stages, layers
// that do not cut into pp*v equal chunks, micro-batches not a multiple of
// pp, or a --pp-split.
Status CheckPipelineFlags(const GptFlags& flags);

}  // namespace ctrun::trainer
