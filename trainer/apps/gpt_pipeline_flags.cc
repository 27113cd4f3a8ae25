#include "trainer/apps/gpt_pipeline_flags.h"

#include <string>

namespace ctrun::trainer {

Status CheckPipelineFlags(const GptFlags& flags) {
  const int pp = flags.mesh_shape.pp;
  const int64_t v = flags.virtual_stages;
  if (flags.schedule != PipeSchedule::kInterleaved) {
    return CheckPipeSchedule(flags.schedule, pp, static_cast<int>(flags.micro_batches), static_cast<int>(v));
  }
  if (v < 2) {
    return Status::InvalidArgument("--pp-schedule interleaved needs --pp-virtual-stages 2 or more (the model "
                                   "chunks each stage holds); for one chunk a stage use --pp-schedule 1f1b");
  }
  if (pp < 2) {
    return Status::InvalidArgument("--pp-schedule interleaved needs a pipeline: give --mesh pp=2 or more");
  }
  if (!flags.pp_split.empty()) {
    return Status::InvalidArgument("--pp-split with --pp-schedule interleaved: not supported (the chunks are cut "
                                   "by layer count); drop --pp-split");
  }
  const int64_t chunks = pp * v;
  if (flags.layers % chunks != 0) {
    const int64_t up = (flags.layers / chunks + 1) * chunks;
    return Status::InvalidArgument("--layers " + std::to_string(flags.layers) + " cannot be cut into pp=" +
                                   std::to_string(pp) + " x --pp-virtual-stages " + std::to_string(v) + " = " +
                                   std::to_string(chunks) + " equal chunks; use --layers " + std::to_string(up) +
                                   " (a multiple of " + std::to_string(chunks) + ") or fewer --pp-virtual-stages");
  }
  return CheckPipeSchedule(flags.schedule, pp, static_cast<int>(flags.micro_batches), static_cast<int>(v));
}

}  // namespace ctrun::trainer
