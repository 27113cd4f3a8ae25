// GptFsdpStages: a GptStage as the ordered stages FSDP runs (fsdp.h): the
// embedding (token embedding + learned positions) when the stage holds it,
// each of its transformer blocks, and the head (final LayerNorm + LM head)
// when it holds it. Running them in order is exactly GptStageImpl::forward
// without sequence parallelism; with tensor parallelism `tp` must be the
// model's tp group (the head's input goes through CopyToTp, as in forward).
// FSDP then shards this rank's TP slices. Under pipeline parallelism the
// pipeline runs the stage itself (FullyShardedDataParallel::GatherForStep):
// the stages only say which parameters form a unit.
//
// The embedding stage's module is a small holder that registers the
// model's own embedding module and `pos` parameter (the same tensors), so
// FSDP finds them under the root. The stages share ownership of the model's
// submodules; `model` must outlive their use.
#pragma once

#include <vector>

#include "base/result.h"
#include "trainer/models/gpt.h"
#include "trainer/models/gpt_chunks.h"
#include "trainer/parallel/fsdp.h"

namespace ctrun::trainer {

// The stages, or InvalidArgument when `model` holds no layer.
Result<std::vector<FsdpStage>> GptFsdpStages(GptStageImpl& model, Communicator* tp = nullptr);

// Every chunk's stages, chunk after chunk (interleaved 1F1B: a pipeline
// rank's v chunks under one FSDP).
Result<std::vector<FsdpStage>> GptFsdpStages(GptChunksImpl& chunks, Communicator* tp = nullptr);

}  // namespace ctrun::trainer
