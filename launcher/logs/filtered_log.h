// FilteredLog: torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters
// file. The worker lines, from every local rank, that contain any of a list
// of texts are also written to one file per attempt (filtered_stdout.log or
// filtered_stderr.log), each line behind its console prefix ("[default0]:"),
// as torch's log tailer writes them.
//
// StreamTee (launcher/logs/stream_tee.h) feeds it whole prefixed lines.
// Ownership: owns its file descriptor. Thread model: one thread (the agent's
// io_context), so lines of different ranks never mix within a line.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

// True when `line` contains any of `needles` (Python's `needle in line`: an
// empty needle is in every line).
bool LineMatchesAny(std::string_view line, const std::vector<std::string>& needles);

class FilteredLog {
 public:
  // Creates (truncates) `path`. IOError naming the path on failure.
  static Result<std::unique_ptr<FilteredLog>> Open(const std::string& path,
                                                   std::vector<std::string> needles);
  ~FilteredLog();
  FilteredLog(const FilteredLog&) = delete;
  FilteredLog& operator=(const FilteredLog&) = delete;

  // `lines` is whole lines, each ending in '\n' and starting with a prefix of
  // `prefix_size` bytes. Writes, in one write, those whose text after the
  // prefix matches. Write errors are dropped (logs never stop a job).
  void WriteMatching(std::string_view lines, size_t prefix_size);

 private:
  FilteredLog(int fd, std::vector<std::string> needles) : fd_(fd), needles_(std::move(needles)) {}
  int fd_;
  std::vector<std::string> needles_;
  std::string out_;
};

}  // namespace ctrun::launcher
