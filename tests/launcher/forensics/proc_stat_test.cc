// ProcStat: /proc/PID/stat parsed from text, and read for this process.
#include "launcher/forensics/proc_stat.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

TEST_CASE("proc stat: pid, name, state, parent and group") {
  std::optional<ProcStat> st = ParseProcStat("4242 (python3) D 17 4240 4240 0 -1 4194560 1 0 0 0\n");
  REQUIRE(st);
  CHECK(st->pid == 4242);
  CHECK(st->comm == "python3");
  CHECK(st->state == 'D');
  CHECK(st->ppid == 17);
  CHECK(st->pgrp == 4240);
}

TEST_CASE("proc stat: a name with spaces and parentheses ends at the last ')'") {
  std::optional<ProcStat> st = ParseProcStat("7 (a (b) c) Z 1 7 7 0");
  REQUIRE(st);
  CHECK(st->comm == "a (b) c");
  CHECK(st->state == 'Z');
  CHECK(st->pgrp == 7);
}

TEST_CASE("proc stat: text in another format is refused") {
  CHECK_FALSE(ParseProcStat(""));
  CHECK_FALSE(ParseProcStat("garbage"));
  CHECK_FALSE(ParseProcStat("x (sh) S 1 2 3"));
  CHECK_FALSE(ParseProcStat("1 (sh) S one 2 3"));
  CHECK_FALSE(ParseProcStat("1 (sh) SS 1 2 3"));
  CHECK_FALSE(ParseProcStat("1 (sh) S 1"));
}

TEST_CASE("proc stat: this process, and its process group's members") {
  std::optional<ProcStat> self = ReadProcStat(::getpid());
  REQUIRE(self);
  CHECK(self->pid == ::getpid());
  CHECK(self->state == 'R');
  CHECK(self->pgrp == ::getpgrp());
  bool found = false;
  for (const ProcStat& m : ProcessGroupMembers(::getpgrp())) found = found || m.pid == ::getpid();
  CHECK(found);
}

TEST_CASE("proc stat: states are described as ps(1) does") {
  CHECK(DescribeState('D') == "D (uninterruptible sleep)");
  CHECK(DescribeState('Z') == "Z (zombie)");
  CHECK(DescribeState('?') == "? (unknown state)");
}

}  // namespace
}  // namespace ctrun::launcher
