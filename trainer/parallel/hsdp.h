// HSDP's replicate dimension (PyTorch's HYBRID_SHARD, FSDP2's 2-D
// (replicate, shard) mesh): FSDP shards over a shard group and the shard
// groups are replicas of each other. FullyShardedDataParallel runs the
// shard group (fsdp.h); these are the two steps it adds over the replicate
// group (FsdpOptions::replicate), each a no-op when that group is null or
// has one rank:
//  - at Create, every parameter and buffer is broadcast from replica 0, so
//    the replicas start equal (after the shard group's own broadcast);
//  - after each unit's reduce-scatter within the shard group (the average
//    over the shard group), the shard's gradient is all-reduced across the
//    replicate group and divided by its size: the average over all of dp.
// A failed collective is Unavailable naming what failed. Thread model: the
// caller's (FSDP's) thread; blocking.
#pragma once

#include <ATen/core/Tensor.h>

#include "base/status.h"
#include "trainer/comm/communicator.h"

namespace ctrun::trainer {

// Broadcasts `tensor` in place from the replicate group's rank 0.
Status BroadcastAcrossReplicas(Communicator* replicate, at::Tensor& tensor);

// Replaces `grad` (float32, contiguous) in place by its mean over the
// replicate group.
Status AverageAcrossReplicas(Communicator* replicate, at::Tensor& grad);

}  // namespace ctrun::trainer
