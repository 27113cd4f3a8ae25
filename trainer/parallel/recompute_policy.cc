#include "trainer/parallel/recompute_policy.h"

namespace ctrun::trainer {

Result<RecomputePolicy> ParseRecomputePolicy(const std::string& name) {
  if (name == "none") return RecomputePolicy::kNone;
  if (name == "full") return RecomputePolicy::kFull;
  if (name == "selective") return RecomputePolicy::kSelective;
  return Status::InvalidArgument("--recompute '" + name + "': unknown (use none, full or selective)");
}

const char* RecomputePolicyName(RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::kFull:
      return "full";
    case RecomputePolicy::kSelective:
      return "selective";
    case RecomputePolicy::kNone:
      break;
  }
  return "none";
}

BlockRecompute RecomputeForBlock(RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::kFull:
      return {.whole = true, .attention_core = false};
    case RecomputePolicy::kSelective:
      return {.whole = false, .attention_core = true};
    case RecomputePolicy::kNone:
      break;
  }
  return {};
}

}  // namespace ctrun::trainer
