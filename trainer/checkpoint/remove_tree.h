// RemoveTree: `rm -rf` of a checkpoint's directory, through libc's nftw
// rather than std::filesystem::remove_all. The trainer links PyTorch's
// libtorch, and the libtorch.so of PyTorch's pip wheels carries its own
// copy of std::filesystem::remove_all, to which the dynamic linker binds the
// trainer's calls; in torch 2.11 (+cu130) that copy jumps to a null address
// (a SIGSEGV at the first old checkpoint removed; found on an H200,
// 2026-11-27). Debian's libtorch does not have the problem.
//
// Free function; thread-safe as nftw is (it does not change the working
// directory: FTW_CHDIR is not used).
#pragma once

#include <string>

namespace ctrun::trainer {

// Removes `path` and everything under it, not following symbolic links.
// True when nothing is left at `path` (also when nothing was there); false
// when something could not be removed (best effort: the rest is removed).
bool RemoveTree(const std::string& path);

}  // namespace ctrun::trainer
