// The OOM killer's count of a memory cgroup (launcher/forensics/oom_kills.h).
#include "launcher/forensics/oom_kills.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

namespace ctrun::launcher {
namespace {

TEST_CASE("oom kills: the v1 memory controller's file, else the v2 cgroup's") {
  const std::string v1 =
      "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/4636\n3:cpuset:/\n0::/\n";
  CHECK(OomKillsFile(v1) == "/sys/fs/cgroup/memory/process_api/4636/memory.oom_control");
  CHECK(OomKillsFile("5:cpu,memory,blkio:/slurm/uid_0/job_7\n") ==
        "/sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.oom_control");
  CHECK(OomKillsFile("4:memory:/\n") == "/sys/fs/cgroup/memory/memory.oom_control");
  CHECK(OomKillsFile("0::/system.slice/job:42.scope\n", "/cg") == "/cg/system.slice/job:42.scope/memory.events");
  CHECK(OomKillsFile("0::/\n") == "/sys/fs/cgroup/memory.events");
  CHECK(OomKillsFile("9:name=systemd:/\n8:pids:/x\n") == std::nullopt);  // no memory controller
  CHECK(OomKillsFile("") == std::nullopt);
  CHECK(OomKillsFile("garbage\n4:memory\n") == std::nullopt);
}

TEST_CASE("oom kills: the count on the oom_kill line") {
  CHECK(ParseOomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3);  // v1
  CHECK(ParseOomKills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n") == 2);  // v2
  CHECK(ParseOomKills("oom_kill 0") == 0);
  CHECK(ParseOomKills("oom_kill_disable 0\nunder_oom 0\n") == std::nullopt);  // kernel < 4.13
  CHECK(ParseOomKills("oom_kill x\n") == std::nullopt);
  CHECK(ParseOomKills("oom_kill -1\n") == std::nullopt);
  CHECK(ParseOomKills("oom_kill 99999999999999999999\n") == std::nullopt);
}

TEST_CASE("oom kills: read for a live process wherever its cgroup's file is there") {
  std::ifstream cgroup("/proc/self/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  const std::optional<std::string> file = OomKillsFile(text.str());
  std::ifstream counts(file.value_or("/nonexistent"));
  std::stringstream lines;
  lines << counts.rdbuf();
  // Where the kernel keeps the count, it is read; where it does not (no
  // memory controller, a kernel before 4.13), nullopt, never an error.
  CHECK(ReadOomKills(getpid()).has_value() == ParseOomKills(lines.str()).has_value());
  CHECK(ReadOomKills(-1) == std::nullopt);
}

}  // namespace
}  // namespace ctrun::launcher
