#include "launcher/process/cpu_binding.h"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

std::vector<int> Allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  std::vector<int> ids;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) ids.push_back(i);
  }
  return ids;
}

// Runs `check` in a forked child after applying `binding` there (as
// WorkerSet does); returns the child's exit code: 0 when the check held,
// 10 + the step when Apply failed.
template <typename Check>
int InChild(const WorkerBinding& binding, Check check) {
  const PreparedBinding prepared(binding);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    PreparedBinding::Step step;
    if (prepared.Apply(&step) != 0) ::_exit(10 + static_cast<int>(step));
    ::_exit(check() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_CASE("The child runs on exactly the CPUs of its binding") {
  const std::vector<int> allowed = Allowed();
  for (int cpu : allowed) {
    WorkerBinding b;
    b.cpus = {cpu};
    CHECK(InChild(b, [cpu] { return Allowed() == std::vector<int>{cpu}; }) == 0);
  }
  WorkerBinding all;
  all.cpus = allowed;
  CHECK(InChild(all, [&] { return Allowed() == allowed; }) == 0);
  // The parent is untouched.
  CHECK(Allowed() == allowed);
}

TEST_CASE("A CPU the process may not use fails the CPU step") {
  WorkerBinding b;
  b.cpus = {4000};  // no such CPU
  CHECK(InChild(b, [] { return true; }) == 10 + static_cast<int>(PreparedBinding::Step::kCpus));
}

TEST_CASE("The child's memory is preferred on its node") {
  if (!MemoryPolicyUnavailable().empty()) {
    WARN("memory policies are refused here: " << MemoryPolicyUnavailable());
    return;
  }
  WorkerBinding b;
  b.memory_nodes = {0};
  CHECK(InChild(b, [] {
          int mode = -1;
          unsigned long mask = 0;
          if (::syscall(SYS_get_mempolicy, &mode, &mask, sizeof(mask) * 8, nullptr, 0UL) != 0) return false;
          return mode == MPOL_PREFERRED && mask == 1UL;
        }) == 0);
  WorkerBinding none;
  CHECK(InChild(none, [] {
          int mode = -1;
          return ::syscall(SYS_get_mempolicy, &mode, nullptr, 0UL, nullptr, 0UL) == 0 &&
                 mode == MPOL_DEFAULT;
        }) == 0);
}

}  // namespace
}  // namespace ctrun::launcher
