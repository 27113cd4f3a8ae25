#include "launcher/cli/command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include <fmt/format.h>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

constexpr std::string_view kDefaultPath = "/usr/local/bin:/bin:/usr/bin";
constexpr std::string_view kLocalRankMacro = "${local_rank}";

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The first executable `name` on `path_var`, as execvp would find it.
std::optional<std::string> SearchPath(const std::string& name, std::string_view path_var) {
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t colon = path_var.find(':', start);
    std::string_view dir = path_var.substr(start, colon == std::string_view::npos ? colon : colon - start);
    std::string candidate = dir.empty() ? name : fmt::format("{}/{}", dir, name);
    if (IsExecutableFile(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return std::nullopt;
}

std::string_view PathVar(const Environment& env) {
  auto it = env.find("PATH");
  return it == env.end() ? kDefaultPath : std::string_view(it->second);
}

Result<std::string> FindPython(const Environment& env) {
  auto it = env.find("PYTHON_EXEC");
  if (it != env.end() && !it->second.empty()) {
    const std::string& exec = it->second;
    if (exec.find('/') != std::string::npos) {
      if (IsExecutableFile(exec)) return exec;
      return Status::NotFound(fmt::format(
          "PYTHON_EXEC '{}': not an executable file (point PYTHON_EXEC at a python interpreter)", Quote(exec)));
    }
    if (auto found = SearchPath(exec, PathVar(env))) return *found;
    return Status::NotFound(fmt::format(
        "PYTHON_EXEC '{}': not found on PATH (use a full path, e.g. PYTHON_EXEC=/usr/bin/python3)", Quote(exec)));
  }
  if (auto found = SearchPath("python3", PathVar(env))) return *found;
  return Status::NotFound(
      "python3: not found on PATH (install python3, set PYTHON_EXEC=/path/to/python, or use --no-python)");
}

Status CheckPythonScript(const std::string& script) {
  struct stat st {};
  if (::stat(script.c_str(), &st) != 0) {
    return Status::NotFound(fmt::format("script '{}': no such file (check the path, or use -m to run a module)", Quote(script)));
  }
  if (::access(script.c_str(), R_OK) != 0) {
    return Status::InvalidArgument(fmt::format("script '{}': not readable (fix its permissions, e.g. chmod a+r)", Quote(script)));
  }
  return Status::Ok();
}

Status CheckExecutable(const std::string& script, const Environment& env) {
  std::string path = script;
  if (script.find('/') == std::string::npos) {
    auto found = SearchPath(script, PathVar(env));
    if (!found) {
      return Status::NotFound(fmt::format(
          "--no-python: '{}' is not an executable on PATH (give its path, e.g. ./{})", Quote(script), Quote(script)));
    }
    path = *found;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound(fmt::format("--no-python: '{}': no such file (check the path)", Quote(script)));
  }
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    return Status::InvalidArgument(fmt::format(
        "--no-python: '{}' is not an executable file (chmod +x it, or drop --no-python for a python script)",
        Quote(script)));
  }
  return Status::Ok();
}

std::string SubstituteLocalRank(const std::string& arg, const std::string& rank) {
  std::string out;
  size_t start = 0;
  for (size_t pos; (pos = arg.find(kLocalRankMacro, start)) != std::string::npos;
       start = pos + kLocalRankMacro.size()) {
    out.append(arg, start, pos - start);
    out += rank;
  }
  out.append(arg, start);
  return out;
}

}  // namespace

Status ResolveCommand(LaunchConfig& config, const Environment& env) {
  bool python = config.run_path || !config.no_python;
  auto exec = FindPython(env);
  if (exec.ok()) {
    config.python_exec = *exec;
  } else if (python) {
    return exec.status();
  }
  if (!python) return CheckExecutable(config.script, env);
  if (config.module && !config.run_path) return Status::Ok();
  return CheckPythonScript(config.script);
}

std::vector<std::string> BuildWorkerArgv(const LaunchConfig& config, int local_rank) {
  std::vector<std::string> argv;
  if (config.run_path || !config.no_python) {
    argv.push_back(config.python_exec);
    argv.push_back("-u");
    if (config.module && !config.run_path) argv.push_back("-m");
  }
  argv.push_back(config.script);
  std::string rank = std::to_string(local_rank);
  for (const std::string& arg : config.script_args) argv.push_back(SubstituteLocalRank(arg, rank));
  return argv;
}

}  // namespace ctrun::launcher
