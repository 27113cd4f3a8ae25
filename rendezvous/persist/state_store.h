// StateStore: the directory of ctrund --state-dir. One file per run id,
// DIR/<run id, percent-encoded>.run, holding EncodeRunState's bytes.
//
// Save replaces a run's file atomically (write DIR/.<name>.tmp, fsync,
// rename over the old file, fsync DIR), so a daemon killed at any instant
// leaves either the old or the new state of each run, never a torn one.
//
// Thread model: not thread-safe; the server calls it under its one lock.
// Copyable (it only holds the path).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "rendezvous/persist/machine_snapshot.h"

namespace ctrun::rdzv {

class StateStore {
 public:
  // Uses `dir`, creating it (one level) when missing. IOError naming the
  // directory and the OS reason when it cannot be created or is not a
  // writable directory.
  static Result<StateStore> Open(const std::string& dir);

  // Writes `run` (see the class comment). IOError naming the file and the OS
  // reason (disk full, permissions); the previous state of the run is then
  // still in place.
  Status Save(const StoredRun& run, ClockPair now) const;

  // Removes the file of `run_id` (a run the server forgot: ctrund
  // --closed-run-ttl) and syncs the directory. OK when there is none;
  // IOError naming the file and the OS reason otherwise.
  Status Remove(const std::string& run_id) const;

  // Every run in the directory, sorted by run id; leftover temporary files
  // are ignored. IOError when the directory or a file cannot be read;
  // InvalidArgument "state file PATH: ..." when a file is not a run state
  // (DecodeRunState's reason) or holds another run id than its name says.
  Result<std::vector<StoredRun>> LoadAll(ClockPair now) const;

  // DIR/<run id, percent-encoded>.run: bytes outside [A-Za-z0-9_-] become %XX.
  std::string PathOf(const std::string& run_id) const;

  const std::string& dir() const { return dir_; }

 private:
  explicit StateStore(std::string dir) : dir_(std::move(dir)) {}

  std::string dir_;
};

}  // namespace ctrun::rdzv
