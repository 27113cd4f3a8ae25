#include "launcher/logs/log_dir.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace ctrun::launcher {

namespace fs = std::filesystem;

namespace {

Result<std::string> MakeTempDir(const std::string& pattern_prefix) {
  std::string pattern = pattern_prefix + "XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return Status::IOError("cannot create directory " + pattern + ": " + std::strerror(errno) +
                           " (check --log-dir or TMPDIR)");
  }
  return std::string(buf.data());
}

}  // namespace

Result<RunLogDir> RunLogDir::Create(const std::optional<std::string>& log_dir,
                                    const std::string& run_id) {
  std::string base;
  bool temporary = false;
  if (log_dir) {
    std::error_code ec;
    fs::create_directories(*log_dir, ec);
    if (ec || !fs::is_directory(*log_dir)) {
      return Status::IOError("--log-dir " + *log_dir + ": cannot create directory (" +
                             (ec ? ec.message() : "not a directory") +
                             "); give a writable directory");
    }
    base = fs::absolute(*log_dir).lexically_normal().string();
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpdir = (tmp && *tmp) ? tmp : "/tmp";
    Result<std::string> made = MakeTempDir(tmpdir + "/torchelastic_");
    if (!made.ok()) return made.status();
    base = *made;
    temporary = true;
  }
  Result<std::string> run_dir = MakeTempDir(base + "/" + run_id + "_");
  if (!run_dir.ok()) return run_dir.status();
  return RunLogDir(base, *run_dir, temporary);
}

// One mkdir per directory: this runs on every launch (bench/launch.sh), and
// std::filesystem's create_directories/remove_all cost several syscalls each.
Status RunLogDir::PrepareAttempt(int attempt, int nproc) {
  const std::string dir = run_dir_ + "/attempt_" + std::to_string(attempt);
  if (::mkdir(dir.c_str(), 0777) != 0) {
    // A restart that reuses the number, or a run directory that went away.
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError("cannot create log directory " + dir + ": " + ec.message());
  } else {
    made_.push_back(dir);
  }
  for (int lr = 0; lr < nproc; ++lr) {
    const std::string rank_dir = dir + "/" + std::to_string(lr);
    if (::mkdir(rank_dir.c_str(), 0777) != 0) {
      return Status::IOError("cannot create log directory " + rank_dir + ": " +
                             std::strerror(errno));
    }
    made_.push_back(rank_dir);
  }
  return Status::Ok();
}

std::string RunLogDir::RankDir(int attempt, int local_rank) const {
  return run_dir_ + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(local_rank);
}
std::string RunLogDir::StdoutFile(int attempt, int local_rank) const {
  return RankDir(attempt, local_rank) + "/stdout.log";
}
std::string RunLogDir::StderrFile(int attempt, int local_rank) const {
  return RankDir(attempt, local_rank) + "/stderr.log";
}
std::string RunLogDir::ErrorFile(int attempt, int local_rank) const {
  return RankDir(attempt, local_rank) + "/error.json";
}

std::string RunLogDir::StacksFile(int attempt, int local_rank) const {
  return RankDir(attempt, local_rank) + "/stacks.txt";
}

std::string RunLogDir::FilteredStdoutFile(int attempt) const {
  return run_dir_ + "/attempt_" + std::to_string(attempt) + "/filtered_stdout.log";
}
std::string RunLogDir::FilteredStderrFile(int attempt) const {
  return run_dir_ + "/attempt_" + std::to_string(attempt) + "/filtered_stderr.log";
}

void RunLogDir::RemoveIfTemporary() {
  if (!temporary_) return;
  // Children before parents. Directories that hold only files (--redirects,
  // --tee) are emptied on the way; anything else falls back to the full walk.
  std::vector<std::string> dirs(made_.rbegin(), made_.rend());
  dirs.push_back(run_dir_);
  dirs.push_back(base_);
  if (removal_.Remove(dirs)) return;
  std::error_code ec;
  fs::remove_all(base_, ec);
}

}  // namespace ctrun::launcher
