#include "trainer/apps/gpt_precision_flags.h"

namespace ctrun::trainer {

Status CheckPrecisionFlags(const GptFlags& flags) {
  if (flags.precision != "fp32" && flags.precision != "fp16") {
    return Status::InvalidArgument("--precision '" + flags.precision + "': unknown (use fp32 or fp16)");
  }
  if (flags.cpu_offload != "none" && flags.cpu_offload != "params" && flags.cpu_offload != "optimizer") {
    return Status::InvalidArgument("--cpu-offload '" + flags.cpu_offload +
                                   "': unknown (use none, params or optimizer)");
  }
  if (flags.precision == "fp16" && flags.backend == "gloo") {
    return Status::InvalidArgument("--precision fp16 with --backend gloo: the CPU has no float16 matmul in this "
                                   "torch; use --backend nccl on a GPU, or --precision fp32");
  }
  if (flags.precision == "fp16" && flags.recompute != RecomputePolicy::kNone) {
    return Status::InvalidArgument(std::string("--precision fp16 with --recompute ") +
                                   RecomputePolicyName(flags.recompute) +
                                   ": not supported yet (the recomputation runs outside autocast); "
                                   "use --recompute none or --precision fp32");
  }
  if (flags.cpu_offload == "none") return Status::Ok();
  if (flags.strategy != "fsdp") {
    return Status::InvalidArgument("--cpu-offload " + flags.cpu_offload + " with --strategy " + flags.strategy +
                                   ": offload is FSDP's; use --strategy fsdp");
  }
  if (flags.backend == "gloo") {
    return Status::InvalidArgument("--cpu-offload " + flags.cpu_offload +
                                   " with --backend gloo: the parameters already live in CPU memory; "
                                   "use --backend nccl on a GPU");
  }
  return Status::Ok();
}

}  // namespace ctrun::trainer
