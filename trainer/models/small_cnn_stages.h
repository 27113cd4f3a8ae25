// SmallCnnStages: SmallCnn as the ordered stages FSDP runs (fsdp.h): conv1
// (+ReLU, pool), conv2 (+ReLU, pool, flatten), fc1 (+ReLU), fc2. Running them
// in order is exactly SmallCnnImpl::forward. The stages share ownership of
// the model's submodules; `model` must outlive their use.
#pragma once

#include <vector>

#include "trainer/parallel/fsdp.h"
#include "trainer/models/small_cnn.h"

namespace ctrun::trainer {

std::vector<FsdpStage> SmallCnnStages(SmallCnnImpl& model);

}  // namespace ctrun::trainer
