// The fp16 loss scaler's state in a checkpoint: one small file per
// checkpoint step, beside what SaveMeshCheckpoint writes (mesh_checkpoint.h):
//
//   <dir>/step-<N>/scaler.pt   a torch archive of GradScaler::ToState()'s
//       named tensors ("scale", "growth_factor", "backoff_factor",
//       "growth_interval", "_growth_tracker") and "skipped_steps" (int64).
//
// The scaler's state is the same on every rank (the inf/NaN verdict is
// agreed over the world), so world rank 0 writes it, before the step's mesh
// checkpoint: SaveMeshCheckpoint commits the step (LATEST) only after that,
// and removes older step directories, this file with them. The file is
// written as <path>.tmp and renamed (archive_file.h): readers see the old
// file or the whole new one.
//
// Free functions; the scaler is borrowed for the call.
#pragma once

#include <string>

#include "base/result.h"
#include "base/status.h"
#include "trainer/parallel/grad_scaler.h"

namespace ctrun::trainer {

// <dir>/step-<step>/scaler.pt
std::string ScalerStatePath(const std::string& dir, int64_t step);

// Writes `scaler`'s state to `path` atomically, creating its directory.
// OK, or IOError naming the file.
Status SaveScalerState(const GradScaler& scaler, const std::string& path);

// Loads `path` into `scaler` (scale, factors, interval, growth tracker and
// skipped-step count). Returns true when loaded, false when there is no
// file at `path` (the scaler is unchanged), or InvalidArgument, one line
// naming the file, when it is unreadable (corrupt or truncated), lacks a
// key, or holds a value out of range; nothing changes on error.
Result<bool> LoadScalerState(const std::string& path, GradScaler& scaler);

}  // namespace ctrun::trainer
