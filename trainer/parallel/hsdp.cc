#include "trainer/parallel/hsdp.h"

#include <ATen/ATen.h>

#include <vector>

namespace ctrun::trainer {

Status BroadcastAcrossReplicas(Communicator* replicate, at::Tensor& tensor) {
  if (replicate == nullptr || replicate->size() <= 1) return Status::Ok();
  std::vector<at::Tensor> tensors{tensor};
  return WaitWork(replicate->Broadcast(tensors, 0), "broadcast of parameters across replicas");
}

Status AverageAcrossReplicas(Communicator* replicate, at::Tensor& grad) {
  if (replicate == nullptr || replicate->size() <= 1) return Status::Ok();
  CTRUN_RETURN_IF_ERROR(WaitWork(replicate->AllReduceSum(grad), "all-reduce of gradients across replicas"));
  grad.div_(replicate->size());
  return Status::Ok();
}

}  // namespace ctrun::trainer
