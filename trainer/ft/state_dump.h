// DumpFtState: the --dump-state output of the trainers' --ft loops, so a
// test can compare every rank of every replica group bitwise
// (tests/integration/test_ft.py): `params` as raw float32 in order, then
// each parameter's optimizer state (optimizer_state.h; keys in name order),
// as raw float32, into one file.
//
// Free function; call on the thread that trains.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace torch::optim {
class Optimizer;
}

namespace ctrun::trainer::ft {

// Writes (truncates) `path`. IOError when it cannot be written;
// InvalidArgument for optimizers optimizer_state.h does not know.
Status DumpFtState(const std::string& path, const std::vector<at::Tensor>& params,
                   const torch::optim::Optimizer& optimizer);

}  // namespace ctrun::trainer::ft
