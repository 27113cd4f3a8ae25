// OomKills: how many times the kernel's OOM killer killed a process in a
// process's memory cgroup: the evidence that a worker ended by SIGKILL was
// out of memory (rendezvous/machine/failure_class.h), read when it started
// and again when it failed.
//
// cgroup v1 (a "memory" controller line in /proc/PID/cgroup): the
// "oom_kill N" line of memory.oom_control under /sys/fs/cgroup/memory;
// cgroup v2 (the "0::" line alone): the same line of memory.events under
// /sys/fs/cgroup. A kernel before 4.13 has no such line: nullopt.
//
// The parsers are pure; ReadOomKills reads /proc and /sys/fs/cgroup.
// Thread-safe: no shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ctrun::launcher {

// The file that counts the OOM kills of the memory cgroup that `cgroup`
// (the text of /proc/PID/cgroup) names, under `root` (/sys/fs/cgroup);
// nullopt when the text names none.
std::optional<std::string> OomKillsFile(std::string_view cgroup, std::string_view root = "/sys/fs/cgroup");

// The count in the text of memory.oom_control or memory.events: the number
// on its "oom_kill N" line; nullopt without one.
std::optional<int64_t> ParseOomKills(std::string_view text);

// The counting file of `pid`'s memory cgroup (OomKillsFile of
// /proc/PID/cgroup); nullopt when the process is gone or names none.
std::optional<std::string> OomKillsFileOf(pid_t pid);
// The count in `file` now; nullopt when unreadable (an old kernel: no line).
std::optional<int64_t> ReadOomKillsFile(const std::string& file);
// The OOM kills of `pid`'s memory cgroup now; nullopt when unreadable (the
// process is gone, no memory controller, an old kernel).
std::optional<int64_t> ReadOomKills(pid_t pid);

}  // namespace ctrun::launcher
