#include "trainer/apps/gpt_hsdp_flags.h"

#include <string>

namespace ctrun::trainer {
namespace {

// The first flag --dp-shard does not work with yet, or "".
std::string Unsupported(const GptFlags& flags) {
  if (flags.sequence_parallel) return "--sequence-parallel";
  if (flags.cpu_offload != "none") return "--cpu-offload " + flags.cpu_offload;
  return "";
}

}  // namespace

bool DpSharded(const GptFlags& flags) { return flags.dp_shard == "full" || flags.dp_shard == "grad-op"; }

Status CheckDpShardFlags(const GptFlags& flags) {
  if (flags.dp_shard != "none" && !DpSharded(flags)) {
    return Status::InvalidArgument("--dp-shard '" + flags.dp_shard + "': unknown (use none, full or grad-op)");
  }
  if (!DpSharded(flags)) {
    if (flags.dp_shard_size == 0) return Status::Ok();
    return Status::InvalidArgument("--dp-shard-size " + std::to_string(flags.dp_shard_size) +
                                   " without --dp-shard: add --dp-shard full or --dp-shard grad-op");
  }
  if (flags.strategy == "fsdp") {
    return Status::InvalidArgument("--dp-shard with --strategy fsdp: pick one (--dp-shard " + flags.dp_shard +
                                   " shards the mesh's dp; --strategy fsdp is full sharding over all ranks)");
  }
  const std::string unsupported = Unsupported(flags);
  if (!unsupported.empty()) {
    return Status::InvalidArgument("--dp-shard " + flags.dp_shard + " with " + unsupported +
                                   ": not supported yet; drop it or use --dp-shard none");
  }
  if (flags.mesh_shape.dp == 0) return Status::Ok();  // dp from WORLD_SIZE: CheckDpShardMesh at start
  return CheckDpShardMesh(flags, flags.mesh_shape);
}

Status CheckDpShardMesh(const GptFlags& flags, const MeshShape& shape) {
  if (!DpSharded(flags) || flags.dp_shard_size == 0) return Status::Ok();
  return CheckDpShardSize(shape, static_cast<int>(flags.dp_shard_size));
}

}  // namespace ctrun::trainer
