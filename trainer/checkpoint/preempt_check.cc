#include "trainer/checkpoint/preempt_check.h"

#include <ATen/ATen.h>

namespace ctrun::trainer {

Result<bool> PreemptCheck::Due() {
  if (!enabled()) return false;
  const int flag = PreemptNoticePresent(env_.notice_file) ? 1 : 0;
  at::Tensor t = at::full({1}, flag, at::TensorOptions().dtype(at::kInt).device(device_));
  CTRUN_RETURN_IF_ERROR(WaitWork(comm_.AllReduceMax(t), "all-reduce of the preemption flag"));
  return t.cpu().item<int>() > 0;
}

}  // namespace ctrun::trainer
