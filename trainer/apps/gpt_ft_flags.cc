#include "trainer/apps/gpt_ft_flags.h"

#include <string>

namespace ctrun::trainer {

Status CheckGptFtFlags(const GptFlags& flags) {
  if (!flags.ft) {
    if (!flags.dump_state.empty()) {
      return Status::InvalidArgument("--dump-state needs --ft (without it use --dump-params)");
    }
    return Status::Ok();
  }
  if (flags.mesh_shape.pp != 1 || flags.mesh_shape.tp != 1) {
    return Status::InvalidArgument("--ft with --mesh " + flags.mesh +
                                   ": --ft runs data parallelism only within a replica group; drop pp and tp "
                                   "from --mesh");
  }
  if ((flags.strategy != "ddp" && flags.strategy != "fsdp") || flags.dp_shard != "none") {
    return Status::InvalidArgument("--ft needs --strategy ddp or fsdp and no --dp-shard (the replica groups are "
                                   "the replicate dimension)");
  }
  if (flags.precision != "fp32" || flags.cpu_offload != "none") {
    return Status::InvalidArgument("--ft needs --precision fp32 and no --cpu-offload (the loss scaler's state "
                                   "is not healed)");
  }
  if (flags.micro_batches != 1) {
    return Status::InvalidArgument("--ft trains each rank's share of a step in one pass: pass --micro-batches 1");
  }
  if (!flags.checkpoint_dir.empty()) {
    return Status::InvalidArgument("--ft with --checkpoint-dir: not supported yet (a restarted group heals from "
                                   "a peer); drop --checkpoint-dir");
  }
  if (!flags.dump_params.empty()) return Status::InvalidArgument("--ft writes --dump-state, not --dump-params");
  if (flags.crash_stage >= 0) {
    return Status::InvalidArgument("--ft with --crash-stage: inject faults with CTRUN_FT_FAULT instead");
  }
  return Status::Ok();
}

}  // namespace ctrun::trainer
