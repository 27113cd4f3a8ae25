// Communicator: the few collectives the trainer uses, over one c10d process
// group (Gloo on CPU, NCCL on GPU).
//
// Created by ConnectProcessGroup (process_group.h) and shared by the DDP
// wrapper, checkpoint code and the training loop. A Communicator owns its
// process group and store; it must outlive every Work it returned. Not
// thread-safe: issue collectives from one thread, in the same order on every
// rank (c10d matches collectives by order, not by name).
//
// The async calls return a c10d Work; Work::wait() throws c10::Error when a
// peer fails or the timeout runs out. Callers at the edge convert that with
// WaitWork().
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace ctrun::trainer {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "gloo" or "nccl".
  virtual std::string backend() const = 0;

  // Starts an in-place sum of `tensor` over all ranks. `tensor` must stay
  // alive and untouched until the Work completes.
  virtual c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor& tensor) = 0;
  // Starts an in-place broadcast of `tensors` from `root`.
  virtual c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>& tensors,
                                                   int root) = 0;
  // Starts a barrier over all ranks.
  virtual c10::intrusive_ptr<c10d::Work> Barrier() = 0;

  // Starts an all-gather of equal shards: `full` (contiguous, same dtype,
  // numel == size() * shard.numel()) receives rank r's `shard` at
  // [r*n, (r+1)*n). Both must stay alive and untouched until the Work
  // completes. The default (for fakes) zero-fills `full`, places this rank's
  // shard and all-reduces it; the c10d communicator overrides it.
  virtual c10::intrusive_ptr<c10d::Work> AllGather(at::Tensor& shard, at::Tensor& full);
  // Starts a reduce-scatter sum: `shard` (numel n, contiguous, same dtype)
  // receives the sum over ranks of `full`'s chunk [rank*n, (rank+1)*n), with
  // full.numel() == size() * n. `full` may be overwritten. Both must stay
  // alive until the Work completes. The default all-reduces `full` and copies
  // the chunk out on wait(); the c10d communicator overrides it (NCCL:
  // native; Gloo, which has none: see reduce_scatter.h).
  virtual c10::intrusive_ptr<c10d::Work> ReduceScatterSum(at::Tensor& full, at::Tensor& shard);

  // Starts an in-place element-wise maximum of `tensor` over all ranks.
  // The default (for fakes) throws std::logic_error.
  virtual c10::intrusive_ptr<c10d::Work> AllReduceMax(at::Tensor& tensor);
  // Start a point-to-point send of `tensor` to rank `peer` of this group /
  // a receive into `tensor` from `peer`. The pair matches on (peer, tag);
  // shapes and dtypes must agree. `tensor` must stay alive (and, for Recv,
  // untouched) until the Work completes. The defaults throw std::logic_error.
  virtual c10::intrusive_ptr<c10d::Work> Send(at::Tensor& tensor, int peer, int tag);
  virtual c10::intrusive_ptr<c10d::Work> Recv(at::Tensor& tensor, int peer, int tag);

  // A new group of the ranks `ranks` (this group's ranks, ascending, this
  // rank among them) named `name`, unique among the groups made from this
  // one: only the members call it, each with the same arguments; it blocks
  // until all of them have. The new group's rank r is ranks[r]. Returns the
  // group (it shares this one's store; this object must outlive it), or
  // InvalidArgument for a bad rank list, Unavailable when the members do
  // not meet within the timeout. The default returns FailedPrecondition.
  virtual Result<std::shared_ptr<Communicator>> NewGroup(const std::string& name,
                                                         const std::vector<int>& ranks);
};

// Waits for `work`. Returns OK, or Unavailable with c10d's reason folded to
// one line (a peer died, or the collective timed out), naming `what`.
Status WaitWork(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);

}  // namespace ctrun::trainer
