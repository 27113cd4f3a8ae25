// ProcStat: what /proc/PID/stat says about one process — enough to tell a
// user which processes outlived SIGKILL and why (uninterruptible sleep, a
// zombie nobody reaps).
//
// ParseProcStat is pure (the file's text in); ReadProcStat and
// ProcessGroupMembers read /proc. Thread-safe: no shared state.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctrun::launcher {

struct ProcStat {
  pid_t pid = 0;
  std::string comm;  // the executable's name, as the kernel keeps it (15 chars)
  char state = '?';  // R, S, D, Z, T, t, X, I...
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

// Parses the text of /proc/PID/stat. The name may hold spaces and
// parentheses: it ends at the last ')'. nullopt when the text is not in that
// format.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// /proc/`pid`/stat, parsed; nullopt when the process is gone (or /proc is
// unreadable).
std::optional<ProcStat> ReadProcStat(pid_t pid);

// Every process whose process group is `pgid`, by pid, in ascending order
// (a scan of /proc; racy by nature: a process may exit meanwhile).
std::vector<ProcStat> ProcessGroupMembers(pid_t pgid);

// "D (uninterruptible sleep)", "Z (zombie)"...: the state letter and its
// meaning, as ps(1) documents it.
std::string DescribeState(char state);

}  // namespace ctrun::launcher
