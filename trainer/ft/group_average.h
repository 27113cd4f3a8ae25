// AverageAcrossGroups: the cross-replica step of fault-tolerant training
// (docs/fault-tolerance.md): after the group's own gradient sync (DDP),
// every parameter's gradient is averaged over the quorum's groups by the
// worker's FtReplica (the abortable ring of its local rank), through one
// flat float32 buffer. A parameter without a gradient counts as zeros (it
// gets one), so every member sends the same layout.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "trainer/ft/ft_replica.h"

namespace ctrun::trainer::ft {

// True when the average reached every gradient; false when the ring failed
// or was aborted (the gradients are then left as the group's own, and this
// step's ballot is no). `flat` is scratch kept across steps.
bool AverageAcrossGroups(FtReplica& replica, const std::vector<at::Tensor>& params, std::vector<float>& flat);

}  // namespace ctrun::trainer::ft
