// Size-based wrap policy: which consecutive stages of a model form one FSDP
// unit (one flat parameter, gathered and freed together).
//
// C++ modules have no forward hooks, so FSDP runs the model as an ordered
// list of stages (see fsdp.h) and a unit is a run of consecutive stages. Like
// PyTorch's size_based_auto_wrap_policy(min_num_params), a unit closes as
// soon as it holds at least `min_unit_params` parameters; the stages left
// over at the end join the last unit (or form the only one). Pure function,
// no torch.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

// A unit: stages [begin, end).
struct UnitSpan {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const UnitSpan&) const = default;
};

// Groups stages with `stage_params[i]` parameters each. Returns the units in
// stage order (covering every stage once), or InvalidArgument when there is
// no stage or `min_unit_params` < 1.
Result<std::vector<UnitSpan>> SizeBasedWrap(const std::vector<int64_t>& stage_params,
                                            int64_t min_unit_params);

}  // namespace ctrun::trainer
