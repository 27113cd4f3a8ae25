// The checks of ctrun-gpt's --precision and --cpu-offload (gpt_flags.h
// calls CheckPrecisionFlags once the other flags are parsed). Plain data,
// no torch, no I/O.
#pragma once

#include "base/status.h"
#include "trainer/apps/gpt_flags.h"

namespace ctrun::trainer {

// OK, or InvalidArgument (one line naming the flag and the fix) when:
//  - --precision is not fp32 or fp16, or --cpu-offload not none, params or
//    optimizer;
//  - fp16 with --backend gloo (torch's CPU kernels have no float16 matmul)
//    or with --recompute (the recomputation would run outside autocast);
//  - --cpu-offload without --strategy fsdp, or with --backend gloo (the
//    parameters already live in CPU memory).
Status CheckPrecisionFlags(const GptFlags& flags);

}  // namespace ctrun::trainer
