// Reduce-scatter and all-gather building blocks for backends that lack them.
//
// Torch 1.13's Gloo process group has no reduce_scatter and no flat
// all-gather (_allgather_base). ReduceScatterByAllToAll builds the
// reduce-scatter from what Gloo has: one equal-split all-to-all (rank r
// receives every rank's chunk r) and a local sum of the N received chunks.
// Cost per rank and call, for a full buffer of B bytes on N ranks:
//  - wire: (N-1)/N * B sent and received, the same volume as a ring
//    reduce-scatter (an all-reduce would move twice that), but as N-1
//    point-to-point messages instead of a pipelined ring;
//  - memory: a temporary receive buffer of B bytes (N chunks) while in flight;
//  - compute: a sum of N chunks of B/N bytes on wait(), in float32 (so bf16
//    chunks are summed without bf16 rounding in between, then rounded once).
// Data movement (all-to-all, list all-gather) is dtype-blind, so bfloat16,
// which Gloo 1.13 does not reduce or gather, travels as float16 bit patterns
// (Gloo has no int16; nothing does arithmetic on them in transit).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

namespace ctrun::trainer {

// A Work whose wait() waits for `inner` and then runs `then` once (on the
// waiting thread). Errors of `inner` propagate and skip `then`.
c10::intrusive_ptr<c10d::Work> ThenWork(c10::intrusive_ptr<c10d::Work> inner,
                                        std::function<void()> then);

// Starts a group's equal-split all-to-all of `input` into `output` (both
// contiguous, same numel and dtype).
using AllToAllFn =
    std::function<c10::intrusive_ptr<c10d::Work>(at::Tensor& output, at::Tensor& input)>;

// Reduce-scatter sum of `full` into `shard` on `size` ranks via `all_to_all`
// (see above). Same contract as Communicator::ReduceScatterSum.
c10::intrusive_ptr<c10d::Work> ReduceScatterByAllToAll(const AllToAllFn& all_to_all, int size,
                                                       at::Tensor& full, at::Tensor& shard);

// The tensor as Gloo can move it: bfloat16 viewed as float16 (same bits),
// anything else unchanged. Shares storage with `t`.
at::Tensor MovableView(const at::Tensor& t);

}  // namespace ctrun::trainer
