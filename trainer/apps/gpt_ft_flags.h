// ctrun-gpt --ft and --dump-state (fault tolerance across replica groups,
// gpt_ft.h): what the flags allow with them. Under --ft each replica group
// is plain data parallelism (DDP over the group's ranks, one pass a step on
// fp32 weights), so the gradients, the optimizer step and a healed state
// are the same on every rank of every group.
//
// Plain functions, no torch, no I/O.
#pragma once

#include "base/result.h"
#include "trainer/apps/gpt_flags.h"

namespace ctrun::trainer {

// Ok when `flags` fit --ft (or --ft is off and there is no --dump-state);
// otherwise InvalidArgument, one line naming the flag and the fix:
// --dump-state without --ft; with --ft: pp or tp in --mesh, --dp-shard
// (--strategy fsdp is HSDP across the groups: gpt_ft.h), --precision fp16
// or --cpu-offload, --micro-batches other
// than 1, --checkpoint-dir, --dump-params, --crash-stage.
Status CheckGptFtFlags(const GptFlags& flags);

}  // namespace ctrun::trainer
