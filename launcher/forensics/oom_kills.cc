#include "launcher/forensics/oom_kills.h"

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

namespace ctrun::launcher {

namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

// Whether the comma-separated `controllers` of a v1 line name "memory".
bool NamesMemory(std::string_view controllers) {
  while (!controllers.empty()) {
    const size_t comma = controllers.find(',');
    if (controllers.substr(0, comma) == "memory") return true;
    if (comma == std::string_view::npos) break;
    controllers.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::optional<std::string> OomKillsFile(std::string_view cgroup, std::string_view root) {
  std::optional<std::string> unified;
  while (!cgroup.empty()) {
    const size_t end = cgroup.find('\n');
    std::string_view line = cgroup.substr(0, end);
    cgroup.remove_prefix(end == std::string_view::npos ? cgroup.size() : end + 1);
    // "ID:CONTROLLERS:PATH"; the path may hold ':'.
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string_view path = line.substr(second + 1);
    if (path.empty() || path.front() != '/') continue;
    if (path == "/") path = "";
    if (NamesMemory(controllers)) return std::string(root) + "/memory" + std::string(path) + "/memory.oom_control";
    if (line.substr(0, first) == "0" && controllers.empty()) {
      unified = std::string(root) + std::string(path) + "/memory.events";
    }
  }
  return unified;
}

std::optional<int64_t> ParseOomKills(std::string_view text) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    constexpr std::string_view kKey = "oom_kill ";
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    int64_t count = 0;
    const auto [rest, ec] = std::from_chars(line.data(), line.data() + line.size(), count);
    if (ec != std::errc() || rest != line.data() + line.size() || count < 0) return std::nullopt;
    return count;
  }
  return std::nullopt;
}

std::optional<std::string> OomKillsFileOf(pid_t pid) {
  const std::optional<std::string> cgroup = ReadSmallFile("/proc/" + std::to_string(pid) + "/cgroup");
  return cgroup ? OomKillsFile(*cgroup) : std::nullopt;
}

std::optional<int64_t> ReadOomKillsFile(const std::string& file) {
  const std::optional<std::string> text = ReadSmallFile(file);
  return text ? ParseOomKills(*text) : std::nullopt;
}

std::optional<int64_t> ReadOomKills(pid_t pid) {
  const std::optional<std::string> file = OomKillsFileOf(pid);
  return file ? ReadOomKillsFile(*file) : std::nullopt;
}

}  // namespace ctrun::launcher
