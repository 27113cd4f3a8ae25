#include "launcher/cli/command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ctrun::launcher {
namespace {

using Args = std::vector<std::string>;
namespace fs = std::filesystem;

// A fresh directory with a fake python3 in bin/ and files made on request;
// removed at the end of the test.
class TempTree {
 public:
  TempTree() {
    std::string pattern = (fs::temp_directory_path() / "ctrun_command_test_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
    fs::create_directories(root_ / "bin");
    fs::create_directories(root_ / "empty");
    python_ = Make("bin/python3", 0755);
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  std::string Make(const std::string& relative, mode_t mode) {
    fs::path p = root_ / relative;
    std::ofstream(p) << "#!/bin/sh\n";
    REQUIRE(::chmod(p.c_str(), mode) == 0);
    return p.string();
  }
  std::string Path(const std::string& relative) const { return (root_ / relative).string(); }
  const std::string& python() const { return python_; }

 private:
  fs::path root_;
  std::string python_;
};

LaunchConfig Python(const std::string& script) {
  LaunchConfig c;
  c.script = script;
  return c;
}

TEST_CASE("BuildWorkerArgv forms", "[command]") {
  LaunchConfig c = Python("train.py");
  c.python_exec = "/usr/bin/python3";
  c.script_args = {"--lr", "0.1"};
  CHECK(BuildWorkerArgv(c, 0) == Args{"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"});

  c.module = true;
  c.script = "pkg.train";
  CHECK(BuildWorkerArgv(c, 0) == Args{"/usr/bin/python3", "-u", "-m", "pkg.train", "--lr", "0.1"});

  c.module = false;
  c.no_python = true;
  c.script = "./a.out";
  CHECK(BuildWorkerArgv(c, 3) == Args{"./a.out", "--lr", "0.1"});

  c.run_path = true;  // run_path wins over --no-python and -m
  c.module = true;
  c.script = "/abs/t.py";
  CHECK(BuildWorkerArgv(c, 1) == Args{"/usr/bin/python3", "-u", "/abs/t.py", "--lr", "0.1"});
}

TEST_CASE("BuildWorkerArgv replaces every literal ${local_rank} in the script args", "[command]") {
  LaunchConfig c = Python("${local_rank}.py");
  c.python_exec = "/p";
  c.script_args = {"--out=/logs/${local_rank}/r${local_rank}.txt", "${local_rank}", "$local_rank",
                   "${local_rank", "${LOCAL_RANK}", "$${local_rank}"};
  CHECK(BuildWorkerArgv(c, 7) == Args{"/p", "-u", "${local_rank}.py", "--out=/logs/7/r7.txt", "7", "$local_rank",
                                      "${local_rank", "${LOCAL_RANK}", "$7"});
  CHECK(BuildWorkerArgv(c, 12)[4] == "12");
}

TEST_CASE("ResolveCommand finds python3 on PATH and checks the script", "[command]") {
  TempTree t;
  std::string script = t.Make("train.py", 0644);
  LaunchConfig c = Python(script);
  Environment env = {{"PATH", t.Path("empty") + ":" + t.Path("bin")}};
  REQUIRE(ResolveCommand(c, env).ok());
  CHECK(c.python_exec == t.python());
  CHECK(c.script == script);

  LaunchConfig missing = Python(t.Path("nope.py"));
  Status s = ResolveCommand(missing, env);
  CHECK(s.IsNotFound());
  CHECK(s.message() ==
        "script '" + t.Path("nope.py") + "': no such file (check the path, or use -m to run a module)");

  LaunchConfig module = Python("not.a.file");
  module.module = true;
  CHECK(ResolveCommand(module, env).ok());
}

TEST_CASE("ResolveCommand reports an unreadable script", "[command]") {
  if (::geteuid() == 0) {
    WARN("skipped: root can read any file");
    return;
  }
  TempTree t;
  LaunchConfig c = Python(t.Make("secret.py", 0200));
  Status s = ResolveCommand(c, {{"PATH", t.Path("bin")}});
  CHECK(s.IsInvalidArgument());
  CHECK_THAT(s.message(), Catch::Contains("not readable"));
}

TEST_CASE("ResolveCommand honours PYTHON_EXEC and fails without any python", "[command]") {
  TempTree t;
  std::string script = t.Make("train.py", 0644);
  std::string other = t.Make("py311", 0755);

  LaunchConfig c = Python(script);
  REQUIRE(ResolveCommand(c, {{"PATH", t.Path("bin")}, {"PYTHON_EXEC", other}}).ok());
  CHECK(c.python_exec == other);

  REQUIRE(ResolveCommand(c, {{"PATH", t.Path("empty") + ":" + t.Path("bin")}, {"PYTHON_EXEC", "python3"}}).ok());
  CHECK(c.python_exec == t.python());

  Status s = ResolveCommand(c, {{"PATH", t.Path("bin")}, {"PYTHON_EXEC", script}});
  CHECK(s.IsNotFound());
  CHECK_THAT(s.message(), Catch::Contains("PYTHON_EXEC '" + script + "': not an executable file"));

  s = ResolveCommand(c, {{"PATH", t.Path("bin")}, {"PYTHON_EXEC", "python9"}});
  CHECK(s.IsNotFound());
  CHECK_THAT(s.message(), Catch::Contains("PYTHON_EXEC 'python9': not found on PATH"));

  s = ResolveCommand(c, {{"PATH", t.Path("empty")}});
  CHECK(s.IsNotFound());
  CHECK_THAT(s.message(), Catch::StartsWith("python3: not found on PATH (install python3, set PYTHON_EXEC"));
}

TEST_CASE("ResolveCommand with --no-python checks the executable and not python", "[command]") {
  TempTree t;
  Environment no_python_env = {{"PATH", t.Path("empty")}};
  std::string tool = t.Make("tool", 0755);

  LaunchConfig c = Python(tool);
  c.no_python = true;
  REQUIRE(ResolveCommand(c, no_python_env).ok());
  CHECK(c.python_exec.empty());
  CHECK(c.script == tool);

  LaunchConfig data = Python(t.Make("data.txt", 0644));
  data.no_python = true;
  Status s = ResolveCommand(data, no_python_env);
  CHECK(s.IsInvalidArgument());
  CHECK_THAT(s.message(), Catch::Contains("is not an executable file (chmod +x it"));

  LaunchConfig dir = Python(t.Path("empty"));
  dir.no_python = true;
  CHECK(ResolveCommand(dir, no_python_env).IsInvalidArgument());

  LaunchConfig missing = Python(t.Path("gone"));
  missing.no_python = true;
  s = ResolveCommand(missing, no_python_env);
  CHECK(s.IsNotFound());
  CHECK_THAT(s.message(), Catch::Contains("no such file"));

  LaunchConfig by_name = Python("python3");  // found through PATH, kept as typed
  by_name.no_python = true;
  REQUIRE(ResolveCommand(by_name, {{"PATH", t.Path("bin")}}).ok());
  CHECK(by_name.script == "python3");

  LaunchConfig unknown = Python("no-such-tool");
  unknown.no_python = true;
  s = ResolveCommand(unknown, {{"PATH", t.Path("bin")}});
  CHECK(s.IsNotFound());
  CHECK_THAT(s.message(), Catch::Contains("'no-such-tool' is not an executable on PATH"));
}

TEST_CASE("ResolveCommand with --run-path runs python on the script", "[command]") {
  TempTree t;
  LaunchConfig c = Python(t.Make("train.py", 0644));
  c.run_path = true;
  c.no_python = true;
  REQUIRE(ResolveCommand(c, {{"PATH", t.Path("bin")}}).ok());
  CHECK(c.python_exec == t.python());
  CHECK(ResolveCommand(c, {{"PATH", t.Path("empty")}}).IsNotFound());
}

}  // namespace
}  // namespace ctrun::launcher
