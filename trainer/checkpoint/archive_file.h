// Writing a torch archive to a file so that readers see the old file or the
// whole new one, never a part: <path>.tmp is written, then renamed over
// <path>. And the form every checkpoint stores a counter in.
//
// Free functions; the archive is borrowed for the call.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace at {
class Tensor;
}
namespace torch::serialize {
class OutputArchive;
}

namespace ctrun::trainer {

// OK, or IOError naming the file and the OS or torch error (the file at
// `path`, if any, is untouched then).
Status SaveArchiveAtomically(torch::serialize::OutputArchive& archive, const std::string& path);

// A 0-dim int64 tensor holding `value`: how checkpoints store a step, an
// epoch, a world size.
at::Tensor CounterTensor(int64_t value);

}  // namespace ctrun::trainer
