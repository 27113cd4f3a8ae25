// FullyShardedDataParallel under pipeline parallelism: gathered for the
// whole step, gradients accumulated over the micro-batches (fsdp.h).
#include "trainer/parallel/fsdp.h"

namespace ctrun::trainer {

Status FullyShardedDataParallel::GatherForStep() {
  accumulating_ = true;
  for (size_t u = 0; u < unit_count(); ++u) StartGather(u);  // all in flight, waited in order
  for (size_t u = 0; u < unit_count(); ++u) {
    Status gathered = EnsureGathered(u);
    if (!gathered.ok()) {
      accumulating_ = false;
      (void)Reshard();
      return gathered;
    }
  }
  return Status::Ok();
}

Status FullyShardedDataParallel::ReduceAccumulatedGrads() {
  accumulating_ = false;
  return FinishGradSync();
}

}  // namespace ctrun::trainer
