#include "trainer/parallel/wrap_policy.h"

#include <string>

namespace ctrun::trainer {

Result<std::vector<UnitSpan>> SizeBasedWrap(const std::vector<int64_t>& stage_params,
                                            int64_t min_unit_params) {
  if (stage_params.empty()) {
    return Status::InvalidArgument("FSDP: the model has no stage; pass at least one stage");
  }
  if (min_unit_params < 1) {
    return Status::InvalidArgument("--min-unit-params " + std::to_string(min_unit_params) +
                                   ": must be at least 1");
  }
  std::vector<UnitSpan> units;
  size_t begin = 0;
  int64_t held = 0;
  for (size_t i = 0; i < stage_params.size(); ++i) {
    held += stage_params[i];
    if (held >= min_unit_params) {
      units.push_back({begin, i + 1});
      begin = i + 1;
      held = 0;
    }
  }
  if (begin < stage_params.size()) {
    if (units.empty()) {
      units.push_back({begin, stage_params.size()});
    } else {
      units.back().end = stage_params.size();
    }
  }
  return units;
}

}  // namespace ctrun::trainer
