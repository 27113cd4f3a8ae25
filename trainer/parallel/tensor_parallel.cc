#include "trainer/parallel/tensor_parallel.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace ctrun::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Communicators travel through autograd contexts as integers: a context
// lives only as long as the graph, which the layers' owner (and so the
// mesh) outlives.
int64_t Handle(Communicator* comm) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(comm)); }
Communicator* CommOf(AutogradContext* ctx) {
  return reinterpret_cast<Communicator*>(static_cast<intptr_t>(ctx->saved_data["comm"].toInt()));
}

bool Trivial(Communicator* comm) { return comm == nullptr || comm->size() == 1; }

void SumInPlace(Communicator* comm, at::Tensor& t) { comm->AllReduceSum(t)->wait(); }

// [B, S/n, ...] on every rank -> [B, S, ...], rank r's part at [r*S/n, (r+1)*S/n).
at::Tensor AllGatherDim1(Communicator* comm, const at::Tensor& x) {
  at::Tensor shard = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = shard.sizes().vec();
  shape[0] *= comm->size();
  at::Tensor full = at::empty(shape, shard.options());
  at::Tensor flat_shard = shard.view({-1}), flat_full = full.view({-1});
  comm->AllGather(flat_shard, flat_full)->wait();
  return full.transpose(0, 1).contiguous();
}

// [B, S, ...] on every rank -> the sum over ranks of [B, S/n, ...] part r.
at::Tensor ReduceScatterDim1(Communicator* comm, const at::Tensor& x) {
  at::Tensor full = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shape = full.sizes().vec();
  shape[0] /= comm->size();
  at::Tensor shard = at::empty(shape, full.options());
  at::Tensor flat_full = full.view({-1}), flat_shard = shard.view({-1});
  comm->ReduceScatterSum(flat_full, flat_shard)->wait();
  return shard.transpose(0, 1).contiguous();
}

struct CopyToTpFn : public torch::autograd::Function<CopyToTpFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::Tensor g = grads[0].clone(at::MemoryFormat::Contiguous);
    SumInPlace(CommOf(ctx), g);
    return {g, at::Tensor()};
  }
};

struct ReduceFromTpFn : public torch::autograd::Function<ReduceFromTpFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    at::Tensor y = x.clone(at::MemoryFormat::Contiguous);
    SumInPlace(CommOf(ctx), y);
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

struct GatherSequenceFn : public torch::autograd::Function<GatherSequenceFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return AllGatherDim1(CommOf(ctx), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {ReduceScatterDim1(CommOf(ctx), grads[0]), at::Tensor()};
  }
};

struct ReduceScatterSequenceFn : public torch::autograd::Function<ReduceScatterSequenceFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return ReduceScatterDim1(CommOf(ctx), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {AllGatherDim1(CommOf(ctx), grads[0]), at::Tensor()};
  }
};

uint64_t NameSeed(const std::string& name, uint64_t seed) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

}  // namespace

at::Tensor CopyToTp(const at::Tensor& x, Communicator* tp) {
  return Trivial(tp) ? x : CopyToTpFn::apply(x, Handle(tp));
}
at::Tensor ReduceFromTp(const at::Tensor& x, Communicator* tp) {
  return Trivial(tp) ? x : ReduceFromTpFn::apply(x, Handle(tp));
}
at::Tensor GatherSequence(const at::Tensor& x, Communicator* tp) {
  return Trivial(tp) ? x : GatherSequenceFn::apply(x, Handle(tp));
}
at::Tensor ReduceScatterSequence(const at::Tensor& x, Communicator* tp) {
  return Trivial(tp) ? x : ReduceScatterSequenceFn::apply(x, Handle(tp));
}

at::Tensor InitShard(const std::string& name, ShardSpec spec, InitKind init, uint64_t seed,
                     ShardRegistry& registry) {
  at::Tensor full;
  switch (init) {
    case InitKind::kNormal: {
      at::Generator gen = at::detail::createCPUGenerator(NameSeed(name, seed));
      full = at::normal(0.0, 0.02, spec.full_shape, gen, at::TensorOptions().dtype(at::kFloat));
      break;
    }
    case InitKind::kZeros: full = at::zeros(spec.full_shape, at::kFloat); break;
    case InitKind::kOnes: full = at::ones(spec.full_shape, at::kFloat); break;
  }
  at::Tensor part = full;
  if (spec.dim >= 0 && spec.parts > 1) {
    const int64_t len = spec.full_shape[static_cast<size_t>(spec.dim)] / spec.parts;
    part = full.narrow(spec.dim, spec.index * len, len).clone(at::MemoryFormat::Contiguous);
  }
  registry[name] = std::move(spec);
  return part;
}

Status SumPartialGrads(torch::nn::Module& module, const ShardRegistry& registry, Communicator* tp) {
  if (Trivial(tp)) return Status::Ok();
  std::vector<at::Tensor> grads;
  for (const auto& item : module.named_parameters(true)) {
    auto it = registry.find(item.key());
    if (it != registry.end() && it->second.grad_needs_tp_sum && item.value().grad().defined()) {
      grads.push_back(item.value().grad());
    }
  }
  if (grads.empty()) return Status::Ok();
  // One all-reduce for all of them, in registration order on every tp rank.
  std::vector<at::Tensor> parts;
  for (const auto& g : grads) parts.push_back(g.reshape({-1}));
  at::Tensor flat = at::cat(parts);
  CTRUN_RETURN_IF_ERROR(WaitWork(tp->AllReduceSum(flat), "tensor-parallel sum of sequence-parallel gradients"));
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
  return Status::Ok();
}

LayerContext LayerContext::Child(const std::string& child) const {
  LayerContext c = *this;
  c.name = name.empty() ? child : name + "." + child;
  return c;
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const LayerContext& ctx, int64_t in, int64_t out,
                                                   bool with_bias) {
  weight = register_parameter("weight", InitShard(ctx.name + ".weight", {{out, in}, 0, ctx.tp_rank(), ctx.tp_size()},
                                                  InitKind::kNormal, ctx.seed, *ctx.registry));
  if (with_bias) {
    bias = register_parameter("bias", InitShard(ctx.name + ".bias", {{out}, 0, ctx.tp_rank(), ctx.tp_size()},
                                                InitKind::kZeros, ctx.seed, *ctx.registry));
  }
}

at::Tensor ColumnParallelLinearImpl::forward(const at::Tensor& x) { return at::linear(x, weight, bias); }

RowParallelLinearImpl::RowParallelLinearImpl(const LayerContext& ctx, int64_t in, int64_t out)
    : tp_(ctx.tp), sequence_parallel_(ctx.sequence_parallel) {
  weight = register_parameter("weight", InitShard(ctx.name + ".weight", {{out, in}, 1, ctx.tp_rank(), ctx.tp_size()},
                                                  InitKind::kNormal, ctx.seed, *ctx.registry));
  ShardSpec bias_spec{{out}, -1, 0, 1, ctx.sequence_parallel && ctx.tp_size() > 1};
  bias = register_parameter("bias", InitShard(ctx.name + ".bias", bias_spec, InitKind::kZeros, ctx.seed,
                                              *ctx.registry));
}

at::Tensor RowParallelLinearImpl::forward(const at::Tensor& x) {
  at::Tensor partial = at::linear(x, weight);
  at::Tensor y = sequence_parallel_ ? ReduceScatterSequence(partial, tp_) : ReduceFromTp(partial, tp_);
  return y + bias;
}

ReplicatedLayerNormImpl::ReplicatedLayerNormImpl(const LayerContext& ctx, int64_t width) {
  const bool partial_grad = ctx.sequence_parallel && ctx.tp_size() > 1;
  weight = register_parameter("weight", InitShard(ctx.name + ".weight", {{width}, -1, 0, 1, partial_grad},
                                                  InitKind::kOnes, ctx.seed, *ctx.registry));
  bias = register_parameter("bias", InitShard(ctx.name + ".bias", {{width}, -1, 0, 1, partial_grad},
                                              InitKind::kZeros, ctx.seed, *ctx.registry));
}

at::Tensor ReplicatedLayerNormImpl::forward(const at::Tensor& x) {
  return at::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
}

}  // namespace ctrun::trainer
