// The checks of ctrun-gpt's --dp-shard and --dp-shard-size: FSDP/ZeRO as
// the dp dimension of the (pp, dp, tp) mesh, with dp split as
// dp_replicate x dp_shard (HSDP; gpt_hsdp.h does the wiring). gpt_flags.cc
// calls CheckDpShardFlags once the other flags are parsed; gpt_main.cc
// calls CheckDpShardMesh once dp is known (it may come from WORLD_SIZE).
// Plain data, no torch, no I/O.
#pragma once

#include "base/status.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/comm/mesh_shape.h"

namespace ctrun::trainer {

// True when the dp dimension is sharded (--dp-shard full or grad-op).
bool DpSharded(const GptFlags& flags);

// OK, or InvalidArgument (one line naming the flag and the fix) when:
//  - --dp-shard is not none, full or grad-op;
//  - --dp-shard-size without --dp-shard full|grad-op, or one that does not
//    divide the --mesh's dp (when --mesh names dp);
//  - --dp-shard with --strategy fsdp (pick one), pp > 1, --sequence-parallel,
//    --recompute, --cpu-offload or --checkpoint-dir (not supported yet).
Status CheckDpShardFlags(const GptFlags& flags);

// With --dp-shard-size S: InvalidArgument unless S divides shape.dp
// (CheckDpShardSize). OK otherwise.
Status CheckDpShardMesh(const GptFlags& flags, const MeshShape& shape);

}  // namespace ctrun::trainer
