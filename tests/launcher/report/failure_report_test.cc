// The agent's failure reporting (launcher/report/failure_report.h): a failed
// worker's record from its exit and its files, the run's final report and
// exit code, the unhealthy leave's and stuck processes' texts.
#include "launcher/report/failure_report.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "launcher/cli/exit_codes.h"
#include "launcher/forensics/stack_text.h"

namespace ctrun::launcher {
namespace {

constexpr const char* kPythonStacks =
    "Thread 0x00007fae238976c0 (most recent call first):\n"
    "  File \"/job/w.py\", line 3 in stuck_here\n";

// A scratch directory, removed at the end.
class FailureTempDir {
 public:
  FailureTempDir() {
    char tmpl[] = "/tmp/ctrun_failure_report_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~FailureTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string Missing(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

WorkerFailure Failure(int local_rank, int rank, int code, int64_t at) {
  WorkerFailure f;
  f.local_rank = local_rank;
  f.rank = rank;
  f.exit_code = code;
  f.pid = 1000 + local_rank;
  f.observed_at_s = at;
  return f;
}

TEST_CASE("failure report: a failure from its exit alone") {
  const WorkerBinding binding{{0, 1}, {0}, "CPUs 0-1 (test)"};
  const WorkerFailure f = FailureOf(WorkerExit{1, 4242, -9, 1700000000}, 5, &binding);
  CHECK(f.local_rank == 1);
  CHECK(f.rank == 5);
  CHECK(f.exit_code == -9);
  CHECK(f.pid == 4242);
  CHECK(f.observed_at_s == 1700000000);
  CHECK(f.binding == "CPUs 0-1 (test)");
  CHECK(FailureOf(WorkerExit{0, 1, 1, 0}, 0, nullptr).binding.empty());
}

TEST_CASE("failure report: the stacks field names the innermost frame when there is one") {
  const std::string text = ComposeStacks("h", kPythonStacks, "");
  CHECK(StacksField("/logs/stacks", text) == "/logs/stacks (innermost frame: stuck_here (/job/w.py:3))");
  CHECK(StacksField("/logs/stacks", "") == "/logs/stacks");
}

TEST_CASE("failure report: a worker's stacks file and error file complete its record") {
  FailureTempDir dir;
  const std::string stacks = dir.File("stacks", ComposeStacks("h", kPythonStacks, ""));
  const std::string error = dir.File("error.json", R"({"message": "boom"})");
  const WorkerFailure f = ReadWorkerFailure(WorkerExit{0, 7, 1, 9}, 0, nullptr, stacks, error);
  CHECK(f.stacks == stacks + " (innermost frame: stuck_here (/job/w.py:3))");
  CHECK(f.error_file == error);
  CHECK(f.error.has_value());
}

TEST_CASE("failure report: without the files the record has neither") {
  FailureTempDir dir;
  const WorkerFailure f =
      ReadWorkerFailure(WorkerExit{0, 7, 1, 9}, 0, nullptr, dir.Missing("stacks"), dir.Missing("error.json"));
  CHECK(f.stacks.empty());
  CHECK(f.error_file.empty());
  CHECK_FALSE(f.error.has_value());
}

TEST_CASE("failure report: the root cause's own exit code") {
  CHECK(RootCauseExitCode(Failure(0, 0, 3, 0)) == 3);
  CHECK(RootCauseExitCode(Failure(0, 0, -15, 0)) == kExitSignalBase + 15);
}

TEST_CASE("failure report: the outcome is exit 1 with the first observed failure as root cause") {
  const std::vector<WorkerFailure> failures = {Failure(0, 0, 3, 200), Failure(1, 1, 7, 100)};
  const FailureOutcome out = DecideFailure(failures, "train.py", "node0", false, std::nullopt);
  REQUIRE(out.root.has_value());
  CHECK(*out.root == 1);
  CHECK(out.exit_code == kExitFailure);
  CHECK(out.report == FormatFailureReport("train.py", "node0", failures, 1));
}

TEST_CASE("failure report: --exit-code-from-root-cause exits with the root cause's code; fail-fast wins") {
  const std::vector<WorkerFailure> failures = {Failure(0, 0, -6, 100)};
  CHECK(DecideFailure(failures, "t", "h", true, std::nullopt).exit_code == kExitSignalBase + 6);
  CHECK(DecideFailure(failures, "t", "h", true, kExitDoNotRequeue).exit_code == kExitDoNotRequeue);
}

TEST_CASE("failure report: no failure seen, no report") {
  const FailureOutcome out = DecideFailure({}, "", "", true, std::nullopt);
  CHECK_FALSE(out.root.has_value());
  CHECK(out.report.empty());
  CHECK(out.exit_code == kExitFailure);
  CHECK(DecideFailure({}, "", "", false, kExitDoNotRequeue).exit_code == kExitDoNotRequeue);
}

TEST_CASE("failure report: the unhealthy leave's block indents each line of the report") {
  CHECK(FormatUnhealthyBlock("node7", "health check 'c' exited with 1\n  GPU 3: ECC") ==
        "[ctrun] node unhealthy: node7\n"
        "  health check 'c' exited with 1\n"
        "    GPU 3: ECC\n"
        "  this node leaves the job (exit code 4); the other nodes go on without it\n");
}

TEST_CASE("failure report: the stuck processes' report names each one") {
  CHECK(StuckReport({StuckProcess{0, 11, true, "python3", "D (uninterruptible sleep)"},
                     StuckProcess{1, 12, false, "", "Z (zombie)"}}) ==
        "workers outlived SIGKILL by --kill-timeout: pid 11 (python3, D (uninterruptible sleep)) pid 12 (Z "
        "(zombie))");
}

WorkerFailure PythonFailure() {
  WorkerFailure f;
  f.local_rank = 0;
  f.rank = 4;
  f.exit_code = 1;
  f.pid = 321;
  f.observed_at_s = 1001;
  f.error_file = "/tmp/attempt_0/0/error.json";
  ErrorFileData data;
  data.message = "ValueError: bad batch\nsecond line";
  data.traceback = "Traceback (most recent call last):\n  File \"w.py\", line 3, in <module>\n"
                   "ValueError: bad batch\n\n";
  data.timestamp = 1000;
  f.error = data;
  return f;
}

TEST_CASE("the rendezvous' failure record: first message line, last traceback line, precise time") {
  const rdzv::WorkerFailureInfo info = FailureInfoOf(PythonFailure(), FailureContext{false, 1001.25}, 1000.75);
  CHECK(info.rank == 4);
  CHECK(info.local_rank == 0);
  CHECK(info.exit_code == 1);
  CHECK(info.signal == 0);
  CHECK(info.pid == 321);
  CHECK(info.error_message == "ValueError: bad batch");
  CHECK(info.last_line == "ValueError: bad batch");
  CHECK(info.error_file == "/tmp/attempt_0/0/error.json");
  CHECK(info.failed_at_unix_s == 1000.75);  // the file's modification time
  CHECK_FALSE(info.stopped_by_agent);

  // A modification time far from the file's own timestamp: the timestamp.
  CHECK(FailureInfoOf(PythonFailure(), FailureContext{}, 5000.5).failed_at_unix_s == 1000);
  CHECK(FailureInfoOf(PythonFailure(), FailureContext{}, std::nullopt).failed_at_unix_s == 1000);
}

TEST_CASE("the rendezvous' failure record: without an error file, the message is read from its stderr") {
  WorkerFailure f = PythonFailure();
  f.error.reset();  // a script without @record
  FailureContext context{false, 1001.5};
  context.stderr_tail = {"step 3", "Traceback (most recent call last):", "  File \"w.py\", line 3, in <module>",
                         "    raise ValueError('bad batch')", "ValueError: bad batch", "", "  "};
  rdzv::WorkerFailureInfo info = FailureInfoOf(f, context, std::nullopt);
  CHECK(info.from_stderr);
  CHECK(info.error_message == "ValueError: bad batch");
  CHECK(info.last_line == "ValueError: bad batch");
  CHECK(info.error_file.empty());
  CHECK(info.failed_at_unix_s == 1001.5);

  // A dotted exception, then a line printed after it: the message is the
  // exception's line, the last line the one after.
  context.stderr_tail = {"torch.distributed.DistBackendError: Connection closed by peer [127.0.0.1]:5",
                         "worker 3 exiting"};
  info = FailureInfoOf(f, context, std::nullopt);
  CHECK(info.error_message == "torch.distributed.DistBackendError: Connection closed by peer [127.0.0.1]:5");
  CHECK(info.last_line == "worker 3 exiting");

  // No line reads as an exception: no message, the last line only; an
  // error-like word inside a sentence is not one.
  context.stderr_tail = {"the Error: budget is spent", "3 Errors: none", "bye"};
  info = FailureInfoOf(f, context, std::nullopt);
  CHECK(info.error_message.empty());
  CHECK(info.last_line == "bye");
  CHECK(info.from_stderr);

  context.stderr_tail = {"KeyboardInterrupt"};
  CHECK(FailureInfoOf(f, context, std::nullopt).error_message == "KeyboardInterrupt");

  // Nothing kept: nothing read from it. An error file wins over the stderr.
  context.stderr_tail = {"", " "};
  CHECK_FALSE(FailureInfoOf(f, context, std::nullopt).from_stderr);
  context.stderr_tail = {"OSError: other"};
  info = FailureInfoOf(PythonFailure(), context, std::nullopt);
  CHECK_FALSE(info.from_stderr);
  CHECK(info.error_message == "ValueError: bad batch");
}

TEST_CASE("the rendezvous' failure record: a signal death without a file, stopped by its agent") {
  WorkerFailure f;
  f.rank = 5;
  f.local_rank = 1;
  f.exit_code = -15;
  f.observed_at_s = 1002;
  f.stacks = "/tmp/stacks_1.txt (innermost frame: w.py:3 stuck_here)";
  rdzv::WorkerFailureInfo info = FailureInfoOf(f, FailureContext{true, 1002.5}, std::nullopt);
  CHECK(info.exit_code == 0);
  CHECK(info.signal == 15);
  CHECK(info.stopped_by_agent);
  CHECK(info.failed_at_unix_s == 1002.5);  // when the agent saw it
  CHECK(info.error_message.empty());
  CHECK(info.error_file.empty());
  CHECK(info.stacks_file == f.stacks);
  CHECK(FailureInfoOf(f, FailureContext{}, std::nullopt).failed_at_unix_s == 1002);
}

TEST_CASE("the rendezvous' failure record: long texts are cut to their bounds on a UTF-8 boundary") {
  WorkerFailure f = PythonFailure();
  f.error->message = std::string(rdzv::kMaxFailureText - 1, 'x') + "\xc3\xa9 tail";
  f.error->traceback = std::string(3000, 'y');
  const rdzv::WorkerFailureInfo info = FailureInfoOf(f, FailureContext{}, std::nullopt);
  CHECK(info.error_message == std::string(rdzv::kMaxFailureText - 1, 'x'));
  CHECK(info.last_line.size() == rdzv::kMaxFailureText);
  CHECK(rdzv::CheckFailureReport("h", {info}).ok());
  f.error->message = "bad \xff byte";
  CHECK(FailureInfoOf(f, FailureContext{}, std::nullopt).error_message == "bad ? byte");

  const RendezvousHandler::FailureReport report =
      FailureReportOf(3, std::string(300, 'h'), {PythonFailure(), f}, {FailureContext{true, 1}});
  CHECK(report.round == 3);
  CHECK(report.host.size() == rdzv::kMaxFailureHost);
  REQUIRE(report.failures.size() == 2);
  CHECK(report.failures[0].stopped_by_agent);
  CHECK_FALSE(report.failures[1].stopped_by_agent);  // no context: none
}

}  // namespace
}  // namespace ctrun::launcher
