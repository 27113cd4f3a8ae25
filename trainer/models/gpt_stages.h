// GptFsdpStages: a GptStage as the ordered stages FSDP runs (fsdp.h): the
// embedding (token embedding + learned positions), each transformer block,
// and the head (final LayerNorm + LM head). Running them in order is exactly
// GptStageImpl::forward for a model built as the only pipeline stage (the
// only layout FSDP wraps), without sequence parallelism; with tensor
// parallelism `tp` must be the model's tp group (the head's input goes
// through CopyToTp, as in forward). FSDP then shards this rank's TP slices.
//
// The embedding stage's module is a small holder that registers the
// model's own embedding module and `pos` parameter (the same tensors), so
// FSDP finds them under the root. The stages share ownership of the model's
// submodules; `model` must outlive their use.
#pragma once

#include <vector>

#include "base/result.h"
#include "trainer/models/gpt.h"
#include "trainer/parallel/fsdp.h"

namespace ctrun::trainer {

// The stages, or InvalidArgument when `model` is not the only pipeline
// stage (it lacks the embedding or the head).
Result<std::vector<FsdpStage>> GptFsdpStages(GptStageImpl& model, Communicator* tp = nullptr);

}  // namespace ctrun::trainer
