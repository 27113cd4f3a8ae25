// AttentionCore: the core of causal multi-head self-attention,
// softmax(causal_mask(q k^T / sqrt(head_dim))) v, per head: the part of a
// transformer block that selective recomputation runs again in backward
// (recompute_policy.h), and whose [B, heads, S, S] probabilities are the
// activations it stops keeping.
//
// Guarantees: the result is a function of q, k and v alone (no random
// numbers; the same values give bitwise the same result, on any thread), so
// running it again under Recompute (recompute.h) reproduces it exactly.
// Under grad mode it is differentiable with respect to q, k and v, and
// autograd keeps [B*heads, S, head_dim] copies of q, k, v and the
// probabilities for backward, nothing else of size [B, heads, S, S].
// Position j > i is masked for query i (causal). The causal mask is made
// once per (S, device, dtype) and kept for the life of the process.
//
// AttentionCoreTime() is the time spent in AttentionCore by all threads
// since the process started, as wall seconds and as the calling threads' CPU
// seconds (thread_cpu_clock.h); the forward only: the backward of the graph
// it built is not in it. A trainer reports from it what selective
// recomputation repeats per step (bench/recompute.sh's floor).
// Thread model: any thread; the clocks are thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace ctrun::trainer {

// {q, k, v}, each [B, heads, S, head_dim] (any strides), same dtype and
// device; returns {context [B, heads, S, head_dim]}.
std::vector<at::Tensor> AttentionCore(const std::vector<at::Tensor>& qkv);

// Totals since the process started (differences of two readings give a
// span's share).
struct CoreTime {
  double wall_seconds = 0;
  double cpu_seconds = 0;
};
CoreTime AttentionCoreTime();

}  // namespace ctrun::trainer
