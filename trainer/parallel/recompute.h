// Recompute: runs a function without keeping its intermediate activations,
// and runs it again in backward to differentiate it (activation
// recomputation; torch.utils.checkpoint's counterpart for libtorch C++).
//
// Forward runs `fn(inputs)` with grad off, so autograd keeps only what this
// node saves: the inputs and `params`. Backward runs `fn` again with grad on,
// on detached copies of the inputs, and differentiates the recomputed
// outputs against the incoming gradients with respect to those copies and
// `params` (torch::autograd::grad: nothing is accumulated there). It returns
// both, so autograd delivers the inputs' gradients upstream and accumulates
// each parameter's .grad once, through the parameter's own AccumulateGrad,
// as without recomputation (gradient hooks, DDP's included, fire as usual).
// The ops are the same, so the gradients are bitwise those of running `fn`
// directly.
//
// `params` must list every tensor requiring grad that `fn` uses besides its
// inputs (a module's parameters()): one not listed gets no gradient.
// `fn` must be deterministic given its inputs and the CPU generator: with
// `preserve_rng_state` (the default, as in torch.utils.checkpoint) the
// default CPU generator's state at forward is restored for the recompute,
// so dropout draws the same mask, and the generator's state is put back
// afterwards (the recompute consumes no random numbers of the caller's).
// CUDA generators are not saved: on CUDA, `fn` must draw no random numbers.
//
// Lifetimes: `fn` (and whatever it captures, e.g. the module) is held by the
// autograd graph until backward has run or the graph is freed.
// Thread model: the caller's thread; backward runs on autograd's.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace ctrun::trainer {

using RecomputeFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)>;

// fn(inputs), keeping for backward only `inputs` and `params`.
std::vector<at::Tensor> Recompute(RecomputeFn fn, const std::vector<at::Tensor>& inputs,
                                  const std::vector<at::Tensor>& params, bool preserve_rng_state = true);

}  // namespace ctrun::trainer
