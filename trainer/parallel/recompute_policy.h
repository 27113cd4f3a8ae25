// RecomputePolicy: which activations a transformer block recomputes in
// backward instead of keeping them from forward (activation recomputation,
// a.k.a. activation checkpointing; see recompute.h for the mechanism).
//
//   none       keep everything (the default; no recomputation)
//   full       recompute each transformer block whole: keep only its input
//   selective  recompute only the attention core (QK^T, scale, causal mask,
//              softmax, attention x V), keeping the linear layers' inputs and
//              outputs (Korthikanti et al. 2022, arXiv 2205.05198, sec. 4.2):
//              the [B, heads, S, S] tensors are the ones not kept
//
// Like the FSDP wrap policy (wrap_policy.h), the decision for each module is
// a pure function of the policy, here per transformer block. No torch.
#pragma once

#include <string>

#include "base/result.h"

namespace ctrun::trainer {

enum class RecomputePolicy { kNone, kFull, kSelective };

// "none", "full" or "selective"; otherwise InvalidArgument, one line naming
// --recompute and the accepted names.
Result<RecomputePolicy> ParseRecomputePolicy(const std::string& name);
const char* RecomputePolicyName(RecomputePolicy policy);

// What one transformer block recomputes.
struct BlockRecompute {
  bool whole = false;           // the block (LayerNorms, attention, MLP)
  bool attention_core = false;  // only the attention core
  bool operator==(const BlockRecompute&) const = default;
};

// The decision for a transformer block under `policy` (every block alike).
BlockRecompute RecomputeForBlock(RecomputePolicy policy);

}  // namespace ctrun::trainer
