#include "launcher/forensics/proc_stat.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace ctrun::launcher {

namespace {

std::optional<long> ToLong(std::string_view s) {
  long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  // "pid (comm) state ppid pgrp ...".
  const size_t open = text.find(" (");
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  ProcStat st;
  std::optional<long> pid = ToLong(text.substr(0, open));
  if (!pid) return std::nullopt;
  st.pid = static_cast<pid_t>(*pid);
  st.comm = std::string(text.substr(open + 2, close - open - 2));
  std::istringstream rest{std::string(text.substr(close + 1))};
  std::string state, ppid, pgrp;
  if (!(rest >> state >> ppid >> pgrp) || state.size() != 1) return std::nullopt;
  std::optional<long> pp = ToLong(ppid), pg = ToLong(pgrp);
  if (!pp || !pg) return std::nullopt;
  st.state = state[0];
  st.ppid = static_cast<pid_t>(*pp);
  st.pgrp = static_cast<pid_t>(*pg);
  return st;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseProcStat(text);
}

std::vector<ProcStat> ProcessGroupMembers(pid_t pgid) {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (!dir) return out;
  while (const dirent* e = ::readdir(dir)) {
    std::optional<long> pid = ToLong(e->d_name);
    if (!pid) continue;
    std::optional<ProcStat> st = ReadProcStat(static_cast<pid_t>(*pid));
    if (st && st->pgrp == pgid) out.push_back(std::move(*st));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(), [](const ProcStat& a, const ProcStat& b) { return a.pid < b.pid; });
  return out;
}

std::string DescribeState(char state) {
  const char* what = "unknown state";
  switch (state) {
    case 'R': what = "running"; break;
    case 'S': what = "sleeping"; break;
    case 'D': what = "uninterruptible sleep"; break;
    case 'Z': what = "zombie"; break;
    case 'T': what = "stopped"; break;
    case 't': what = "stopped by a tracer"; break;
    case 'X': what = "dead"; break;
    case 'I': what = "idle"; break;
    case 'P': what = "parked"; break;
    case 'W': what = "paging"; break;
  }
  return std::string(1, state) + " (" + what + ")";
}

}  // namespace ctrun::launcher
