// Writing a torch archive to a file so that readers see the old file or the
// whole new one, never a part: <path>.tmp is written, then renamed over
// <path>.
//
// Free function; the archive is borrowed for the call.
#pragma once

#include <string>

#include "base/status.h"

namespace torch::serialize {
class OutputArchive;
}

namespace ctrun::trainer {

// OK, or IOError naming the file and the OS or torch error (the file at
// `path`, if any, is untouched then).
Status SaveArchiveAtomically(torch::serialize::OutputArchive& archive, const std::string& path);

}  // namespace ctrun::trainer
