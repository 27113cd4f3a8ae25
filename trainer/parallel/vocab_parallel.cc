#include "trainer/parallel/vocab_parallel.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace ctrun::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void AllReduce(Communicator* tp, at::Tensor& t, bool max) {
  if (tp == nullptr || tp->size() == 1) return;
  (max ? tp->AllReduceMax(t) : tp->AllReduceSum(t))->wait();
}

struct VocabCrossEntropyFn : public torch::autograd::Function<VocabCrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            int64_t vocab_start, int64_t comm) {
    auto* tp = reinterpret_cast<Communicator*>(static_cast<intptr_t>(comm));
    const int64_t local_vocab = logits.size(1);
    at::Tensor max = std::get<0>(logits.max(1)).contiguous();
    AllReduce(tp, max, /*max=*/true);
    at::Tensor shifted = logits - max.unsqueeze(1);

    at::Tensor in_range = targets.ge(vocab_start).logical_and(targets.lt(vocab_start + local_vocab));
    at::Tensor local_target = (targets - vocab_start).clamp(0, local_vocab - 1);
    at::Tensor target_logit = shifted.gather(1, local_target.unsqueeze(1)).squeeze(1) * in_range.to(shifted.dtype());
    target_logit = target_logit.contiguous();
    AllReduce(tp, target_logit, false);

    at::Tensor exp = shifted.exp();
    at::Tensor sum_exp = exp.sum(1).contiguous();
    AllReduce(tp, sum_exp, false);

    ctx->save_for_backward({exp.div_(sum_exp.unsqueeze(1)), local_target, in_range});
    return sum_exp.log() - target_logit;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0].clone();  // softmax, this rank's columns
    const at::Tensor& local_target = saved[1];
    const at::Tensor& in_range = saved[2];
    grad.scatter_add_(1, local_target.unsqueeze(1), -in_range.to(grad.dtype()).unsqueeze(1));
    grad.mul_(grads[0].unsqueeze(1));
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(const LayerContext& ctx, int64_t vocab, int64_t width)
    : tp_(ctx.tp), sequence_parallel_(ctx.sequence_parallel) {
  const int64_t rows = vocab / ctx.tp_size();
  vocab_start_ = rows * ctx.tp_rank();
  vocab_end_ = vocab_start_ + rows;
  weight = register_parameter("weight", InitShard(ctx.name + ".weight", {{vocab, width}, 0, ctx.tp_rank(), ctx.tp_size()},
                                                  InitKind::kNormal, ctx.seed, *ctx.registry));
}

at::Tensor VocabParallelEmbeddingImpl::forward(const at::Tensor& tokens) {
  const bool split = tp_ != nullptr && tp_->size() > 1;
  if (!split) return at::embedding(weight, tokens);
  at::Tensor outside = tokens.lt(vocab_start_).logical_or(tokens.ge(vocab_end_));
  at::Tensor local = (tokens - vocab_start_).masked_fill(outside, 0);
  at::Tensor partial = at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);
  return sequence_parallel_ ? ReduceScatterSequence(partial, tp_) : ReduceFromTp(partial, tp_);
}

at::Tensor VocabParallelCrossEntropy(const at::Tensor& logits, const at::Tensor& targets, int64_t vocab_start,
                                     Communicator* tp) {
  return VocabCrossEntropyFn::apply(logits, targets, vocab_start,
                                    static_cast<int64_t>(reinterpret_cast<intptr_t>(tp)));
}

}  // namespace ctrun::trainer
