#include "trainer/apps/gpt_hsdp.h"

#include <torch/nn/module.h>

#include "trainer/apps/gpt_hsdp_flags.h"
#include "trainer/models/gpt_stages.h"

namespace ctrun::trainer {

Result<std::unique_ptr<FullyShardedDataParallel>> MakeGptFsdp(GptChunksImpl& chunks, DeviceMesh& mesh,
                                                               Communicator& world, const GptFlags& flags) {
  Communicator* tp = mesh.group(MeshDim::kTp);
  auto stages = GptFsdpStages(chunks, tp);
  if (!stages.ok()) return stages.status();
  FsdpOptions options;
  options.strategy = flags.dp_shard == "grad-op" ? ShardingStrategy::kShardGradOp : ShardingStrategy::kFullShard;
  options.min_unit_params = flags.min_unit_params;
  options.offload_params = flags.cpu_offload == "params";
  if (options.min_unit_params == 0) {  // one block per unit: the first block's size
    for (const FsdpStage& stage : *stages) {
      if (std::dynamic_pointer_cast<TransformerBlockImpl>(stage.module) == nullptr) continue;
      for (const auto& p : stage.module->parameters()) options.min_unit_params += p.numel();
      break;
    }
  }
  Communicator* shard = &world;  // --strategy fsdp: the whole world
  if (DpSharded(flags)) {
    const int dp = mesh.shape().dp;
    CTRUN_RETURN_IF_ERROR(mesh.SplitDp(flags.dp_shard_size > 0 ? static_cast<int>(flags.dp_shard_size) : dp));
    shard = mesh.dp_shard();
    options.replicate = mesh.dp_replicate();
  }
  return FullyShardedDataParallel::Create(chunks, std::move(*stages), *shard, options);
}

}  // namespace ctrun::trainer
