// PreemptEnv: reading ctrun's preemption variables, the notice's presence,
// the per-rank marker ("S\n") and rank 0's lines.
#include "trainer/checkpoint/preempt_env.h"

#include <catch2/catch.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>

namespace ct = ctrun::trainer;

namespace {

ct::EnvLookup PreemptVars(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string PreemptTempDir() {
  char tmpl[] = "/tmp/ctrun-preempt-env-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("ReadPreemptEnv: both variables, or off when the notice file is unset or empty") {
  auto on = ct::ReadPreemptEnv(PreemptVars({{"CTRUN_PREEMPT_FILE", "/logs/preempt.json"},
                                            {"CTRUN_PREEMPT_SAVED_FILE", "/logs/saved_1"}}));
  CHECK(on.enabled());
  CHECK(on.notice_file == "/logs/preempt.json");
  CHECK(on.saved_file == "/logs/saved_1");

  auto unset = ct::ReadPreemptEnv(PreemptVars({{"CTRUN_PREEMPT_SAVED_FILE", "/logs/saved_1"}}));
  CHECK_FALSE(unset.enabled());
  CHECK_FALSE(ct::ReadPreemptEnv(PreemptVars({{"CTRUN_PREEMPT_FILE", ""}})).enabled());

  auto no_marker = ct::ReadPreemptEnv(PreemptVars({{"CTRUN_PREEMPT_FILE", "/logs/preempt.json"}}));
  CHECK(no_marker.enabled());
  CHECK(no_marker.saved_file.empty());
}

TEST_CASE("PreemptNoticePresent: whether the file exists, whatever it holds") {
  const std::string dir = PreemptTempDir();
  const std::string notice = dir + "/preempt.json";
  CHECK_FALSE(ct::PreemptNoticePresent(notice));
  CHECK_FALSE(ct::PreemptNoticePresent(""));
  std::ofstream(notice) << "";
  CHECK(ct::PreemptNoticePresent(notice));
  ::unlink(notice.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("WritePreemptMarker: the decimal step and a newline, replacing what was there") {
  const std::string dir = PreemptTempDir();
  const std::string marker = dir + "/saved_0";
  std::ofstream(marker) << "a longer earlier content\n";
  REQUIRE(ct::WritePreemptMarker(marker, 1234).ok());
  CHECK(Slurp(marker) == "1234\n");
  REQUIRE(ct::WritePreemptMarker(marker, 0).ok());
  CHECK(Slurp(marker) == "0\n");
  CHECK(ct::WritePreemptMarker("", 7).ok());  // no marker asked for

  auto missing = ct::WritePreemptMarker(dir + "/no/such/dir/saved", 7);
  CHECK(missing.code() == ctrun::Status::Code::kIOError);
  CHECK(missing.message().find(dir + "/no/such/dir/saved") != std::string::npos);
  ::unlink(marker.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("Preemption lines as the contract spells them") {
  CHECK(ct::PreemptSavedLine(42, 1.234) == "preempted: saved step 42 in 1.23 s");
  CHECK(ct::PreemptSavedLine(7, 0) == "preempted: saved step 7 in 0.00 s");
  CHECK(ct::PreemptNothingSavedLine(9) == "preemption notice at step 9, but no --checkpoint-dir: nothing saved");
}
