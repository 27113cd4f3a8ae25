#include "launcher/report/report.h"

#include <algorithm>
#include <filesystem>

#include <catch2/catch.hpp>

#include "tests/source_path.h"

namespace ctrun::launcher {
namespace {

const std::filesystem::path kReportDataDir = ctrun::testing::FromExeDir(CTRUN_REPORT_TEST_DATA);

std::vector<std::string> ReportLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) return lines;
    start = end + 1;
  }
}

void CheckSameLines(const std::string& actual, const std::string& expected) {
  std::vector<std::string> a = ReportLines(actual);
  std::vector<std::string> e = ReportLines(expected);
  for (size_t i = 0; i < std::min(a.size(), e.size()); ++i) {
    INFO("line " << i);
    CHECK(a[i] == e[i]);
  }
  CHECK(a.size() == e.size());
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

WorkerFailure Failure(int local_rank, int rank, int exit_code, int pid, int64_t observed) {
  WorkerFailure f;
  f.local_rank = local_rank;
  f.rank = rank;
  f.exit_code = exit_code;
  f.pid = pid;
  f.observed_at_s = observed;
  return f;
}

ErrorFileData FlatError(const std::string& message, std::optional<int64_t> ts) {
  ErrorFileData e;
  e.form = ErrorFileForm::kFlat;
  e.message = message;
  e.timestamp = ts;
  e.raw_json = "{}";
  return e;
}

TEST_CASE("The root cause is the earliest failure, file timestamps first") {
  std::vector<WorkerFailure> failures = {Failure(0, 0, -15, 1, 100), Failure(1, 1, 1, 2, 100)};
  CHECK(ChooseRootCause(failures) == 0);  // tie: first in the list

  failures[1].error = FlatError("boom", 90);
  CHECK(ChooseRootCause(failures) == 1);  // the file's time beats the observed time

  failures[1].error = FlatError("boom", std::nullopt);
  failures[1].observed_at_s = 99;
  CHECK(ChooseRootCause(failures) == 1);  // no file timestamp: observed time

  failures.push_back(Failure(2, 2, 1, 3, 50));
  CHECK(ChooseRootCause(failures) == 2);
  CHECK(ChooseRootCause({}) == 0);
}

TEST_CASE("The root cause ignores the observed time when a file gives one") {
  std::vector<WorkerFailure> failures = {Failure(0, 0, 1, 1, 10), Failure(1, 1, 1, 2, 200)};
  failures[0].error = FlatError("late writer", 300);
  CHECK(ChooseRootCause(failures) == 1);
}

TEST_CASE("Signal names follow Python's signal.Signals") {
  CHECK(SignalName(15) == "SIGTERM");
  CHECK(SignalName(9) == "SIGKILL");
  CHECK(SignalName(6) == "SIGABRT");
  CHECK(SignalName(29) == "SIGIO");
  CHECK(SignalName(34) == "SIGRTMIN");
  CHECK(SignalName(36) == "SIGRTMIN+2");
  CHECK(SignalName(64) == "SIGRTMAX");
  CHECK(SignalName(99) == "SIG99");
}

TEST_CASE("Failures without a file get torch's made-up messages") {
  CHECK(FailureMessage(Failure(0, 0, -11, 42, 0)) == "Signal 11 (SIGSEGV) received by PID 42");
  CHECK(FailureMessage(Failure(0, 0, 3, 42, 0)) ==
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html");
  WorkerFailure empty_flat = Failure(0, 0, -9, 7, 0);
  empty_flat.error = FlatError("", 1);
  CHECK(FailureMessage(empty_flat) == "Signal 9 (SIGKILL) received by PID 7");
}

TEST_CASE("A structured file shows its callstack, else its message, else <N/A>") {
  WorkerFailure f = Failure(0, 0, 1, 1, 0);
  ErrorFileData e;
  e.message = "ValueError: x";
  e.traceback = "Traceback\n  here";
  e.timestamp = 1;
  f.error = e;
  CHECK(FailureMessage(f) == "Traceback\n  here");
  f.error->traceback.clear();
  CHECK(FailureMessage(f) == "ValueError: x");
  f.error->message.clear();
  CHECK(FailureMessage(f) == "<N/A>");
}

TEST_CASE("Root cause error data is the file's, else made up from the failure") {
  WorkerFailure f = Failure(0, 0, -15, 9, 1234);
  ErrorFileData made_up = RootCauseErrorData(f);
  CHECK(made_up.message == "Signal 15 (SIGTERM) received by PID 9");
  CHECK(made_up.timestamp == 1234);
  CHECK(made_up.raw_json.empty());
  f.error = FlatError("from file", 5);
  CHECK(RootCauseErrorData(f).message == "from file");
}

TEST_CASE("The entrypoint name skips the interpreter's options") {
  CHECK(EntrypointName("/usr/bin/python3", {"-u", "train.py", "--lr", "1"}, "/usr/bin/python3") ==
        "train.py");
  CHECK(EntrypointName("/usr/bin/python3", {"-u", "-m"}, "/usr/bin/python3").empty());
  CHECK(EntrypointName("./a.out", {"-x"}, "/usr/bin/python3") == "./a.out");
}

TEST_CASE("A -m launch is named after the module, as torch's first non-option rule gives") {
  CHECK(EntrypointName("python", {"-u", "-m", "pkg.main", "x"}, "python") == "pkg.main");
}

// Goldens below are torch 1.13's ChildFailedError.format_msg() output for the
// same failures, printed by /usr/bin/python3 with TZ=UTC and socket.getfqdn
// patched to return "node0.example.com".

TEST_CASE("Report for one signal failure without an error file") {
  WorkerFailure f = Failure(3, 3, -15, 1234, 1714564800);
  f.error_file = "/logs/attempt_0/3/error.json";  // not written: shown as <N/A>
  const std::string expected =
      "\n"
      "======================================================\n"
      "train.py FAILED\n"
      "------------------------------------------------------\n"
      "Failures:\n"
      "  <NO_OTHER_FAILURES>\n"
      "------------------------------------------------------\n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  time      : 2024-05-01_12:00:00\n"
      "  host      : node0.example.com\n"
      "  rank      : 3 (local_rank: 3)\n"
      "  exitcode  : -15 (pid: 1234)\n"
      "  error_file: <N/A>\n"
      "  traceback : Signal 15 (SIGTERM) received by PID 1234\n"
      "======================================================";
  std::vector<WorkerFailure> failures = {f};
  std::string report = FormatFailureReport("train.py", "node0.example.com", failures,
                                           ChooseRootCause(failures), ReportTimeZone::kUtc);
  CheckSameLines(report, expected);
  CHECK(report == expected);
}

TEST_CASE("Report for two failures whose root cause has a multi-line traceback") {
  const std::string fixture = "tests/launcher/report/data/record_error.json";
  Result<ErrorFileData> error = ReadErrorFile((kReportDataDir / "record_error.json").string());
  REQUIRE(error.ok());
  WorkerFailure killed = Failure(0, 4, -15, 4321, 1795315925);
  killed.error_file = "/nonexistent/error.json";
  WorkerFailure raised = Failure(1, 5, 1, 4322, 1795315925);
  raised.error_file = fixture;
  raised.error = *error;
  std::vector<WorkerFailure> failures = {killed, raised};

  const std::string expected =
      "\n"
      "============================================================\n"
      "train.py FAILED\n"
      "------------------------------------------------------------\n"
      "Failures:\n"
      "[0]:\n"
      "  time      : 2026-11-22_02:52:05\n"
      "  host      : node0.example.com\n"
      "  rank      : 4 (local_rank: 0)\n"
      "  exitcode  : -15 (pid: 4321)\n"
      "  error_file: <N/A>\n"
      "  traceback : Signal 15 (SIGTERM) received by PID 4321\n"
      "------------------------------------------------------------\n"
      "Root Cause (first observed failure):\n"
      "[1]:\n"
      "  time      : 2026-11-22_02:52:00\n"
      "  host      : node0.example.com\n"
      "  rank      : 5 (local_rank: 1)\n"
      "  exitcode  : 1 (pid: 4322)\n"
      "  error_file: tests/launcher/report/data/record_error.json\n"
      "  traceback : Traceback (most recent call last):\n"
      "    File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/"
      "errors/__init__.py\", line 346, in wrapper\n"
      "      return f(*args, **kwargs)\n"
      "             ^^^^^^^^^^^^^^^^^^\n"
      "    File \"/work/main/tests/launcher/logs/data/record_error_worker.py\", line 17, in main\n"
      "      load(7)\n"
      "    File \"/work/main/tests/launcher/logs/data/record_error_worker.py\", line 12, in load\n"
      "      raise ValueError(f\"loss is nan at step {step}\")\n"
      "  ValueError: loss is nan at step 7\n"
      "  \n"
      "============================================================";
  REQUIRE(ChooseRootCause(failures) == 1);
  std::string report = FormatFailureReport("train.py", "node0.example.com", failures, 1,
                                           ReportTimeZone::kUtc);
  CheckSameLines(report, expected);
  CHECK(report == expected);
}

TEST_CASE("Report with a flat error file shows its message unindented") {
  WorkerFailure plain = Failure(0, 0, 1, 10, 1714564800);
  WorkerFailure flat = Failure(1, 1, 3, 11, 1714564800);
  flat.error_file = "/tmp/report_fix/flat.json";
  flat.error = FlatError("CUDA out of memory\nTried to allocate 2 GiB", 1714564700);
  std::vector<WorkerFailure> failures = {plain, flat};
  const std::string expected =
      "\n"
      "============================================================\n"
      "trainer FAILED\n"
      "------------------------------------------------------------\n"
      "Failures:\n"
      "[0]:\n"
      "  time      : 2024-05-01_12:00:00\n"
      "  host      : node0.example.com\n"
      "  rank      : 0 (local_rank: 0)\n"
      "  exitcode  : 1 (pid: 10)\n"
      "  error_file: <N/A>\n"
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
      "------------------------------------------------------------\n"
      "Root Cause (first observed failure):\n"
      "[1]:\n"
      "  time      : 2024-05-01_11:58:20\n"
      "  host      : node0.example.com\n"
      "  rank      : 1 (local_rank: 1)\n"
      "  exitcode  : 3 (pid: 11)\n"
      "  error_file: /tmp/report_fix/flat.json\n"
      "  traceback : CUDA out of memory\n"
      "Tried to allocate 2 GiB\n"
      "============================================================";
  std::string report = FormatFailureReport("trainer", "node0.example.com", failures,
                                           ChooseRootCause(failures), ReportTimeZone::kUtc);
  CheckSameLines(report, expected);
}

TEST_CASE("A bound worker's entry names its binding after its exit code") {
  WorkerFailure bound = Failure(0, 4, 1, 10, 1714564800);
  bound.binding = "CPUs 0-3, memory preferred on NUMA node 0 (--numa-binding exclusive, no GPU)";
  WorkerFailure unbound = Failure(1, 5, 1, 11, 1714564801);
  std::vector<WorkerFailure> failures = {bound, unbound};
  const std::vector<std::string> lines =
      ReportLines(FormatFailureReport("x", "h", failures, 0, ReportTimeZone::kUtc));
  CHECK(std::count(lines.begin(), lines.end(), "  binding   : " + bound.binding) == 1);
  const auto exit_line = std::find(lines.begin(), lines.end(), "  exitcode  : 1 (pid: 10)");
  REQUIRE(exit_line != lines.end());
  CHECK(*(exit_line + 1) == "  binding   : " + bound.binding);
  const auto other = std::find(lines.begin(), lines.end(), "  exitcode  : 1 (pid: 11)");
  REQUIRE(other != lines.end());
  CHECK(*(other + 1) == "  error_file: <N/A>");
}

TEST_CASE("The report is as wide as its widest line, up to 60") {
  std::vector<WorkerFailure> failures = {Failure(0, 0, -9, 1, 0)};
  // "  traceback : Signal 9 (SIGKILL) received by PID 1" is the widest line.
  std::vector<std::string> lines =
      ReportLines(FormatFailureReport("x", "h", failures, 0, ReportTimeZone::kUtc));
  CHECK(lines[1] == std::string(50, '='));
  CHECK(lines[3] == std::string(50, '-'));
  // Width counts characters, not UTF-8 bytes: "<45 x é> FAILED" is 52 wide.
  std::vector<std::string> wide =
      ReportLines(FormatFailureReport(Repeat("\xc3\xa9", 45), "h", failures, 0, ReportTimeZone::kUtc));
  CHECK(wide[1].size() == 52);
  // A longer title widens the report, up to 60 columns.
  CHECK(ReportLines(FormatFailureReport(std::string(52, 'n'), "h", failures, 0,
                                        ReportTimeZone::kUtc))[1] == std::string(59, '='));
  CHECK(ReportLines(FormatFailureReport(std::string(80, 'n'), "h", failures, 0,
                                        ReportTimeZone::kUtc))[1] == std::string(60, '='));
}

TEST_CASE("Other failures keep list order around the root cause") {
  std::vector<WorkerFailure> failures = {Failure(0, 0, -15, 1, 20), Failure(1, 1, 1, 2, 10),
                                         Failure(2, 2, -15, 3, 20)};
  std::string report = FormatFailureReport("x", "h", failures, ChooseRootCause(failures),
                                           ReportTimeZone::kUtc);
  size_t first = report.find("[0]:");
  size_t third = report.find("[2]:");
  size_t root_header = report.find("Root Cause");
  size_t root = report.find("[1]:");
  REQUIRE(first != std::string::npos);
  CHECK(first < third);
  CHECK(third < root_header);
  CHECK(root_header < root);
}

}  // namespace
}  // namespace ctrun::launcher
