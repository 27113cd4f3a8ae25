// DirRemoval: removes a run's log directories without waiting for the disk
// once per directory.
//
// On ext4 every directory holds one block, and so does every file with data.
// Freeing a block where the file system is mounted with `discard` (as the
// root file system, and so /tmp, is on many cloud VMs) waits for the device:
// ~4 ms a block on the project's VM, so removing the 3 + N empty directories
// of a launch of N workers one after another took ~45 ms at N = 8, ten times
// the launch itself. The wait comes when the last reference to the inode
// goes, not when its name does. So DirRemoval opens each entry, removes its
// name (rmdir or unlink: a few microseconds), and then lets go of the
// descriptors where nobody waits for them:
//  - on a memory file system (tmpfs, ramfs) nothing waits: closed at once;
//  - else they are registered with an io_uring instance that is closed at
//    once: the kernel drops them from its own worker, after ctrun may have
//    exited (three system calls, whatever the count);
//  - where io_uring is refused (seccomp in many containers,
//    kernel.io_uring_disabled), they are closed on threads of DirRemoval's
//    own, so that the waits overlap; Wait (or the destructor) joins them.
// Every name is gone when Remove returns, on every path.
//
// Thread model: Remove and Wait are called from one thread (the agent's);
// the closing threads touch nothing but their own descriptors.
#pragma once

#include <cstddef>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ctrun::launcher {

class DirRemoval {
 public:
  // How the descriptors are let go of on a file system that may wait.
  enum class Release {
    kKernel,   // io_uring, falling back to threads
    kThreads,  // threads only (tests)
  };

  explicit DirRemoval(Release release = Release::kKernel) : release_(release) {}
  ~DirRemoval() { Wait(); }
  DirRemoval(DirRemoval&&) = default;
  // Waits for this removal's threads first.
  DirRemoval& operator=(DirRemoval&& other) {
    Wait();
    release_ = other.release_;
    threads_ = std::move(other.threads_);
    return *this;
  }
  DirRemoval(const DirRemoval&) = delete;
  DirRemoval& operator=(const DirRemoval&) = delete;

  // Removes each of `dirs`, in the order given (children before their
  // parents), with one rmdir each. A directory that still holds files loses
  // them first (each unlinked; subdirectories are not followed). Stops at the
  // first directory that cannot be removed (a subdirectory not in the list,
  // already gone, a symbolic link, no permission) and returns false: the
  // caller falls back to a full walk for what is left. Never throws; errors
  // are only this bool.
  bool Remove(const std::vector<std::string>& dirs);

  // Returns when the closing threads (if any) are done. Idempotent.
  void Wait();

  // How many closing threads `descriptors` get, given whether the file system
  // may wait on a free: none (close inline) when it cannot wait or there is
  // at most one; else one per descriptor, up to `max_threads`.
  static size_t ThreadsFor(size_t descriptors, bool may_wait, size_t max_threads);

  // Whether freeing an inode on the file system of `statfs` type `f_type`
  // may wait for a device: false for the memory file systems (tmpfs, ramfs),
  // true for anything else.
  static bool MayWait(long f_type);

 private:
  // Lets go of `fds` on threads, or inline where none can be had.
  void CloseOnThreads(const std::vector<int>& fds);

  Release release_;
  std::vector<std::thread> threads_;
};

}  // namespace ctrun::launcher
