// RunLogDir: the on-disk layout of one run's logs, as torchrun lays it out:
//
//   <log_dir>/<run_id>_<random>/attempt_<N>/<local_rank>/{stdout.log,stderr.log,error.json}
//   <log_dir>/<run_id>_<random>/attempt_<N>/<local_rank>/stacks.txt (ctrun's hang forensics)
//   <log_dir>/<run_id>_<random>/attempt_<N>/{filtered_stdout.log,filtered_stderr.log}
//
// <log_dir> is --log-dir (created if missing) or, when not given, a new
// /tmp/torchelastic_<random> directory. Each start of the local worker group
// uses attempt_<restart count>/, wiped and re-created. Movable value, used
// from one thread (it only builds paths and touches the filesystem on the
// calls that say so). Its destructor waits for RemoveIfTemporary's threads, if any.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "launcher/logs/dir_removal.h"

namespace ctrun::launcher {

class RunLogDir {
 public:
  // Creates the base and run directories. Errors: IOError naming the path and
  // the fix when a directory cannot be created.
  static Result<RunLogDir> Create(const std::optional<std::string>& log_dir,
                                  const std::string& run_id);

  // Wipes and re-creates attempt_<attempt>/<0..nproc-1>/. Errors: IOError.
  Status PrepareAttempt(int attempt, int nproc);

  std::string RankDir(int attempt, int local_rank) const;
  std::string StdoutFile(int attempt, int local_rank) const;
  std::string StderrFile(int attempt, int local_rank) const;
  std::string ErrorFile(int attempt, int local_rank) const;
  // Where the worker's stacks are saved before it is killed for a hang.
  std::string StacksFile(int attempt, int local_rank) const;
  // The attempt's --duplicate-stdout-filters / --duplicate-stderr-filters files.
  std::string FilteredStdoutFile(int attempt) const;
  std::string FilteredStderrFile(int attempt) const;

  const std::string& path() const { return run_dir_; }
  // True when no --log-dir was given and the base is a temporary directory.
  bool temporary() const { return temporary_; }
  // Removes the temporary base directory (no-op when --log-dir was given).
  // The names are gone when it returns; on a disk-backed file system the
  // blocks they held are freed by the kernel afterwards, or, where io_uring
  // is refused, on threads that the destructor waits for
  // (launcher/logs/dir_removal.h).
  void RemoveIfTemporary();

 private:
  RunLogDir(std::string base, std::string run_dir, bool temporary)
      : base_(std::move(base)), run_dir_(std::move(run_dir)), temporary_(temporary) {}

  std::string base_;
  std::string run_dir_;
  bool temporary_;
  // The directories PrepareAttempt made, in order: removed one rmdir each.
  std::vector<std::string> made_;
  DirRemoval removal_;
};

}  // namespace ctrun::launcher
