// Checkpoints: model parameters and buffers, optimizer state and the
// training position, in one file written atomically by rank 0.
//
// File format: the line "ctrun-checkpoint 1 <payload bytes> <crc32>\n", then
// a torch::serialize archive (the payload) holding "model/<name>" tensors,
// "optim" (the optimizer's own archive) and "meta/*" scalars. The CRC covers
// the payload, so truncation or bit rot is caught before anything is loaded.
//
// Writing: <path>.tmp is written, fsync'ed, renamed over <path>, and the
// directory fsync'ed; until the rename the previous checkpoint stays whole.
// Loading never modifies any file. Free functions, no state; the module and
// optimizer are borrowed for the duration of the call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer {

// Where training stands. `epoch_consumed` counts the positions of the
// epoch's permutation already trained on (see DistributedSampler).
struct TrainPosition {
  int64_t step = 0;            // optimizer steps done, over all epochs
  int64_t epoch = 0;           // the epoch in progress
  int64_t epoch_consumed = 0;  // samples of `epoch` already used, all ranks
  int64_t world_size = 0;      // world size when saved (informational)
  int64_t seed = 0;            // sampler seed; must match to resume

  bool operator==(const TrainPosition&) const = default;
};

// Writes `module`, `optimizer` and `position` to `path` atomically (see
// above). Returns OK, or IOError naming the path and the OS error (the
// previous checkpoint, if any, is untouched).
Status SaveCheckpoint(const std::string& path, torch::nn::Module& module,
                      torch::optim::Optimizer& optimizer, const TrainPosition& position);

// Loads `path` into `module` and `optimizer`. Returns the saved position;
// nullopt when `path` does not exist (fresh start); or, touching neither the
// file nor (for the first two) the module:
//  - InvalidArgument "corrupt" when the header, size or CRC is wrong or the
//    archive does not parse;
//  - InvalidArgument "does not match" when a parameter or buffer is missing,
//    extra, or has another shape/dtype, or the optimizer state does not fit;
//  - IOError when the file cannot be read.
// Each message names the file and says to fix or remove it.
Result<std::optional<TrainPosition>> LoadCheckpoint(const std::string& path,
                                                    torch::nn::Module& module,
                                                    torch::optim::Optimizer& optimizer);

}  // namespace ctrun::trainer
