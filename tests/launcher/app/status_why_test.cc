// `ctrun status --why` (launcher/app/status_why.h): the verdict's text.
#include "launcher/app/status_why.h"

#include <catch2/catch.hpp>

#include "launcher/app/status_command.h"

namespace ctrun::launcher {
namespace {

rdzv::ReportedFailure WhyFailure(const std::string& host, int pid, int rank, double at, const std::string& message,
                        bool stopped = false) {
  rdzv::ReportedFailure r;
  r.node = rdzv::NodeId{host, pid, 0};
  r.host = host;
  r.failure.rank = rank;
  r.failure.local_rank = rank % 2;
  r.failure.exit_code = 1;
  r.failure.failed_at_unix_s = at;
  r.failure.error_message = message;
  r.failure.stopped_by_agent = stopped;
  return r;
}

constexpr double kWhyAt = 1795833601.25;  // 2026-11-28 02:40:01.250 UTC

TEST_CASE("status --why: the root cause with its message, last line and files, then the consequences grouped") {
  rdzv::RunView v;
  rdzv::ReportedFailure root = WhyFailure("host-c", 3, 4, kWhyAt, "ValueError: rank 4 failed on purpose");
  root.failure.last_line = "ValueError: rank 4 failed on purpose";
  root.failure.error_file = "/tmp/r/attempt_0/0/error.json";
  root.failure.stacks_file = "/tmp/r/stacks_0.txt";
  v.failures = {root,
                WhyFailure("host-a", 1, 0, kWhyAt + 0.4, "RuntimeError: Connection closed by peer"),
                WhyFailure("host-a", 1, 1, kWhyAt + 0.4, "RuntimeError: Connection reset by peer"),
                WhyFailure("host-b", 2, 2, kWhyAt + 0.41, "RuntimeError: Connection closed by peer"),
                WhyFailure("host-b", 2, 3, kWhyAt + 0.42, "RuntimeError: Connection closed by peer"),
                WhyFailure("host-c", 3, 5, kWhyAt + 0.1, "", /*stopped=*/true)};
  v.failures.back().failure.exit_code = 0;
  v.failures.back().failure.signal = 15;
  v.failures_seen = 6;
  CHECK(FormatWhy(v) ==
        "verdict: rank 4 on host-c raised ValueError: rank 4 failed on purpose; 5 other ranks failed after it (4 "
        "connection errors, 1 stopped by its agent)\n"
        "root cause: rank 4 (node host-c#3, local rank 0) exited with 1 at 2026-11-28 02:40:01.250 UTC: "
        "ValueError: rank 4 failed on purpose\n"
        "  last line: ValueError: rank 4 failed on purpose\n"
        "  error file: /tmp/r/attempt_0/0/error.json\n"
        "  stacks: /tmp/r/stacks_0.txt\n"
        "consequences: 5 other failed workers\n"
        "  ranks 0-3 on 2 nodes: connection error after 0.4 s\n"
        "  rank 5 on 1 node: stopped by its agent after 0.1 s\n");
  CHECK(DescribeFailure(v.failures.back()) ==
        "rank 5 (node host-c#3, local rank 1) was killed by SIGTERM at 2026-11-28 02:40:01.350 UTC");
  // Two nodes on one host differ by their agents' pids; a --local-addr
  // other than the host name shows the host name too.
  rdzv::ReportedFailure twin = WhyFailure("vm", 7260, 0, kWhyAt, "");
  CHECK(DescribeFailure(twin).rfind("rank 0 (node vm#7260, local rank 0)", 0) == 0);
  twin.node.addr = "10.0.0.1";
  CHECK(DescribeFailure(twin).rfind("rank 0 (node 10.0.0.1#7260 (vm), local rank 0)", 0) == 0);
}

TEST_CASE("status --why: spread times, dropped failures, a lone root, nothing, nothing but stopped workers") {
  rdzv::RunView v;
  v.failures = {WhyFailure("a", 1, 0, kWhyAt, "KeyError: 'x'"), WhyFailure("b", 2, 3, kWhyAt + 2, "OSError"), WhyFailure("b", 2, 2, kWhyAt + 5, "E")};
  v.failures_seen = 90;
  CHECK(FormatWhy(v) ==
        "verdict: rank 0 on a raised KeyError: 'x'; 2 other ranks failed after it (other errors)\n"
        "root cause: rank 0 (node a#1, local rank 0) exited with 1 at 2026-11-28 02:40:01.250 UTC: KeyError: 'x'\n"
        "  no error file and no stderr kept: decorate its main with @record (from torch.distributed.elastic.multiprocessing.errors import record) "
        "for its error file, or run ctrun with --tee 3\n"
        "consequences: 2 other failed workers\n"
        "  ranks 2-3 on 1 node: failed 2.0-5.0 s after it\n"
        "(90 failures reported in all; the server keeps the earliest and the newest 3)\n");

  v.failures = {WhyFailure("a", 1, 0, kWhyAt, "")};
  v.failures_seen = 1;
  CHECK(FormatWhy(v) ==
        "verdict: rank 0 on a exited with code 1; no error file and no stderr line\n"
        "root cause: rank 0 (node a#1, local rank 0) exited with 1 at 2026-11-28 02:40:01.250 UTC\n"
        "  no error file and no stderr kept: decorate its main with @record (from torch.distributed.elastic.multiprocessing.errors import record) "
        "for its error file, or run ctrun with --tee 3\n"
        "consequences: none\n");

  // Its message read from its stderr (no @record): said once, with the fix.
  v.failures = {WhyFailure("a", 1, 0, kWhyAt, "ValueError: bad")};
  v.failures[0].failure.last_line = "ValueError: bad";
  v.failures[0].failure.from_stderr = true;
  CHECK(FormatWhy(v) ==
        "verdict: rank 0 on a raised ValueError: bad\n"
        "root cause: rank 0 (node a#1, local rank 0) exited with 1 at 2026-11-28 02:40:01.250 UTC: ValueError: bad\n"
        "  last line: ValueError: bad\n"
        "  no error file: the lines above are from its stderr; decorate its main with @record (from "
        "torch.distributed.elastic.multiprocessing.errors import record) for its error file\n"
        "consequences: none\n");
  // Killed by a signal: no error file is expected, and nothing is said of one.
  v.failures[0].failure.exit_code = 0;
  v.failures[0].failure.signal = 9;
  v.failures[0].failure.from_stderr = false;
  CHECK(FormatWhy(v).find("no error file") == std::string::npos);

  CHECK(FormatWhy(rdzv::RunView{}) == "no failure reported\n");

  // What a node sent cannot drive the terminal.
  v.failures = {WhyFailure("a\x1b[2J", 1, 0, kWhyAt, "bad\x1b]0;x\x07")};
  CHECK(FormatWhy(v).rfind("verdict: rank 0 on a?[2J raised bad?]0;x?\n"
                           "root cause: rank 0 (node a?[2J#1, local rank 0) exited with 1 at 2026-11-28 02:40:01.250 UTC: "
                           "bad?]0;x?\n", 0) == 0);

  v.failures = {WhyFailure("a", 1, 0, kWhyAt, "", true)};
  CHECK(FormatWhy(v) ==
        "verdict: no worker failed on its own: every failure reported was a worker its agent stopped; 1 rank failed "
        "(stopped by its agent)\n"
        "no root cause: every worker reported was stopped by its agent\n"
        "consequences: 1 failed worker\n"
        "  rank 0 on 1 node: stopped by its agent\n");
}

TEST_CASE("status --why: the flag, alone or with the others") {
  auto a = ParseStatusArgs({"--rdzv-endpoint", "h:1", "--why", "--rdzv-id", "j"}, {});
  REQUIRE(a.ok());
  CHECK(a->why);
  CHECK(a->run_id == "j");
  a = ParseStatusArgs({}, {});
  REQUIRE(a.ok());
  CHECK_FALSE(a->why);
  CHECK(StatusHelpText().find("--why") != std::string::npos);
}

}  // namespace
}  // namespace ctrun::launcher
