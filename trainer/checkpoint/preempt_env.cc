#include "trainer/checkpoint/preempt_env.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ctrun::trainer {

PreemptEnv ReadPreemptEnv(const EnvLookup& env) {
  PreemptEnv out;
  out.notice_file = env("CTRUN_PREEMPT_FILE").value_or("");
  out.saved_file = env("CTRUN_PREEMPT_SAVED_FILE").value_or("");
  return out;
}

bool PreemptNoticePresent(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

Status WritePreemptMarker(const std::string& path, int64_t step) {
  if (path.empty()) return Status::Ok();
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return Status::IOError("cannot write the preemption marker '" + path + "': " + std::strerror(errno));
  }
  const int written = std::fprintf(file, "%lld\n", static_cast<long long>(step));
  const int write_errno = written < 0 ? errno : 0;
  if (std::fclose(file) != 0 || written < 0) {
    return Status::IOError("cannot write the preemption marker '" + path +
                           "': " + std::strerror(write_errno != 0 ? write_errno : errno));
  }
  return Status::Ok();
}

std::string PreemptSavedLine(int64_t step, double seconds) {
  char line[96];
  std::snprintf(line, sizeof line, "preempted: saved step %lld in %.2f s", static_cast<long long>(step), seconds);
  return line;
}

std::string PreemptNothingSavedLine(int64_t step) {
  return "preemption notice at step " + std::to_string(step) + ", but no --checkpoint-dir: nothing saved";
}

}  // namespace ctrun::trainer
