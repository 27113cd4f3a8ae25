// Preemption's pure parts (launcher/agent/preemption.h): the budget, the
// notice line and file, the waiting line, and the verdict from the workers'
// markers.
#include "launcher/agent/preemption.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ctrun::launcher {
namespace {

TEST_CASE("preemption: the budget is the grace, at most Slurm's time left less the margin") {
  CHECK(PreemptBudget(120, std::nullopt, 1000) == 120);
  CHECK(PreemptBudget(120, 1000 + 60, 1000) == 60 - kSlurmMarginS);
  CHECK(PreemptBudget(120, 1000 + 500, 1000) == 120);
  CHECK(PreemptBudget(120, 1000 + 5, 1000) == 0);  // past the margin: no time at all
}

TEST_CASE("preemption: the notice is one JSON line, written whole") {
  WorkerNotice n{"SIGUSR1", 20, 1790000000.5};
  const std::string line = NoticeLine(n);
  REQUIRE(line.back() == '\n');
  const nlohmann::json j = nlohmann::json::parse(line);
  CHECK(j["source"] == "SIGUSR1");
  CHECK(j["budget_s"] == 20.0);
  CHECK(j["deadline_unix_s"] == 1790000000.5);

  char tmpl[] = "/tmp/ctrun_preempt_test_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  REQUIRE(WriteNoticeFile(dir + "/preempt", n).ok());
  std::ifstream in(dir + "/preempt");
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == line);
  CHECK(!std::filesystem::exists(dir + "/preempt.tmp"));
  const Status bad = WriteNoticeFile(dir + "/missing/preempt", n);
  CHECK(bad.code() == Status::Code::kIOError);
  CHECK(bad.message().find(dir + "/missing/preempt.tmp") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("preemption: the waiting line counts the saved and the running, and the time left") {
  CHECK(PreemptWaitingLine(1, 2, 2, 21.3) ==
        "waiting for the workers to save before the preemption: 1 of 2 saved, 2 still running; stopping them in 22 s");
  CHECK(PreemptWaitingLine(0, 4, 4, -2) ==
        "waiting for the workers to save before the preemption: 0 of 4 saved, 4 still running; stopping them in 0 s");

  char tmpl[] = "/tmp/ctrun_preempt_test_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/0") << "7\n";
  CHECK(SavedCount({dir + "/0", dir + "/1"}) == 1);
  CHECK(SavedCount({}) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("preemption: the verdict from the markers") {
  using Contents = std::vector<std::optional<std::string>>;
  const PreemptVerdict same = VerdictOf(Contents{"12\n", " 12 ", "12"});
  CHECK(same.saved);
  CHECK(same.step == 12);
  const PreemptVerdict none = VerdictOf(Contents{std::nullopt, std::nullopt});
  CHECK(none.finished);
  CHECK(!none.saved);
  CHECK(VerdictOf(Contents{"12", std::nullopt, std::nullopt}).why ==
        "local ranks 1 and 2 exited 0 without writing CTRUN_PREEMPT_SAVED_FILE");
  CHECK(VerdictOf(Contents{"12", "twelve"}).why ==
        "local rank 1 wrote something other than a step number to CTRUN_PREEMPT_SAVED_FILE");
  CHECK(VerdictOf(Contents{"-1"}).why ==
        "local rank 0 wrote something other than a step number to CTRUN_PREEMPT_SAVED_FILE");
  CHECK(VerdictOf(Contents{"3", "4", "3"}).why ==
        "the workers saved different steps: step 3 (local ranks 0 and 2), step 4 (local rank 1)");
  CHECK(!VerdictOf(Contents{}).saved);
  CHECK(VerdictOf(Contents{}).why == "no worker ran");
  // Files: a marker that is absent counts as none.
  const PreemptVerdict files = ReadVerdict({"/nonexistent/ctrun/preempt_saved"});
  CHECK(!files.saved);
  CHECK(files.finished);
  CHECK(!ReadVerdict({"/nonexistent/ctrun/preempt_saved", "/nonexistent/ctrun/preempt_saved"}).saved);
}

}  // namespace
}  // namespace ctrun::launcher
