// RunsJson (GET /api/runs) from a real machine's view and history, and its string escaping.
#include "rendezvous/metrics/runs_json.h"

#include <catch2/catch.hpp>

#include "rendezvous/machine/run_view.h"
#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

TEST_CASE("JsonString escapes quotes, backslashes, controls and HTML brackets, keeps valid UTF-8") {
  CHECK(JsonString("plain") == "\"plain\"");
  CHECK(JsonString("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(JsonString("l1\nl2\r\t") == "\"l1\\nl2\\r\\t\"");
  CHECK(JsonString(std::string("\x01\x1f\x7f", 3)) == "\"\\u0001\\u001f\\u007f\"");
  CHECK(JsonString(std::string("a\0b", 3)) == "\"a\\u0000b\"");
  CHECK(JsonString("</script>&") == "\"\\u003c/script\\u003e\\u0026\"");
  CHECK(JsonString("h\xc3\xa9t\xe2\x82\xac\xf0\x9f\x98\x80") == "\"h\xc3\xa9t\xe2\x82\xac\xf0\x9f\x98\x80\"");
}

TEST_CASE("JsonString replaces bytes that are not UTF-8 with U+FFFD") {
  CHECK(JsonString("\xff") == "\"\\ufffd\"");
  CHECK(JsonString("a\xc3") == "\"a\\ufffd\"");                    // truncated
  CHECK(JsonString("\xc0\xaf") == "\"\\ufffd\\ufffd\"");            // overlong
  CHECK(JsonString("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
  CHECK(JsonString("\xf4\x90\x80\x80") == "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
  CHECK(JsonString("\xe2\x82") == "\"\\ufffd\\ufffd\"");
}

TEST_CASE("RunsJson: an empty server") {
  CHECK(RunsJson({}, TimePoint{}) == "{\"version\":1,\"runs\":[]}\n");
}

TEST_CASE("RunsJson shows a run's nodes, rounds and restarts, times as seconds before now") {
  Script s(Nodes(2, 2));
  RunHistory h;
  auto step = [&](auto&& f) {
    f();
    h.Add(s.last(), s.At(s.Elapsed()));
  };
  step([&] { s.Join("a", std::nullopt, 2); });
  s.Jump(seconds(1));
  step([&] { s.Join("b"); });  // round 0 at 1 s
  s.Jump(seconds(2));
  step([&] { s.Leave("b", LeaveReason::kFailure); });  // restart at 3 s
  s.Jump(seconds(1));
  step([&] { s.Join("b"); });  // at 4 s: b is back (its old rank kept), a still expected
  const TimePoint now = s.At(seconds(6));
  const RunStatus run{"job\"1", ViewOf(s.machine().Export(), s.machine().Tally(), now), &h};
  CHECK(RunsJson({run}, now) ==
        "{\"version\":1,\"runs\":[{\"run_id\":\"job\\\"1\",\"state\":\"forming\",\"round\":1,\"min_nodes\":2,"
        "\"max_nodes\":2,\"live_nodes\":2,\"world_size\":0,\"last_call_in_s\":null,\"nodes\":["
        "{\"node\":\"a\",\"state\":\"rejoining\",\"group_rank\":0,\"workers\":2,\"addr\":\"a.ip\","
        "\"last_keep_alive_s\":6.000,\"health\":null,\"step_time_s\":null},"
        "{\"node\":\"b\",\"state\":\"participant\",\"group_rank\":1,\"workers\":1,\"addr\":\"b.ip\","
        "\"last_keep_alive_s\":2.000,\"health\":null,\"step_time_s\":null}],"
        "\"rounds_total\":1,\"rounds\":[{\"round\":0,\"world_size\":3,\"nodes\":[\"a\",\"b\"],"
        "\"started_s_ago\":5.000,\"ended_s_ago\":3.000,\"end\":\"restarted\"}],"
        "\"restarts_total\":1,\"restarts\":[{\"round\":0,\"cause\":\"workers_failed\",\"node\":\"b\","
        "\"nodes\":[\"a\"],\"s_ago\":3.000}],\"why\":null}]}\n");
}

TEST_CASE("RunsJson: the verdict on the failures the nodes reported") {
  RunView view;
  FailureRecord record;
  WorkerFailureInfo root;
  root.rank = 4;
  root.exit_code = 1;
  root.failed_at_unix_s = 100;
  root.error_message = "ValueError: <bad>";
  root.last_line = "ValueError: <bad>";
  WorkerFailureInfo peer;
  peer.rank = 0;
  peer.exit_code = 1;
  peer.failed_at_unix_s = 100.5;
  peer.error_message = "RuntimeError: Connection reset by peer";
  WorkerFailureInfo stopped = peer;
  stopped.rank = 5;
  stopped.local_rank = 1;
  stopped.exit_code = 0;
  stopped.signal = 15;
  stopped.stopped_by_agent = true;
  record.Add(NodeId{"c", 3, 0}, "host-c", 2, {root, stopped}, TimePoint{});
  record.Add(NodeId{"a", 1, 0}, "host-a", 2, {peer}, TimePoint{});
  AddFailures(record, TimePoint{}, view);
  const std::string json = RunsJson({RunStatus{"r", view, nullptr}}, TimePoint{});
  CHECK(json.find("\"why\":{\"failures_seen\":3,\"verdict\":{\"cause_class\":\"python_exception\",\"cause_rank\":4,"
                  "\"cause_node\":\"c#3\",\"cause_host\":\"host-c\",\"evidence\":\"raised ValueError: \\u003cbad\\u003e\","
                  "\"line\":\"verdict: rank 4 on host-c raised ValueError: \\u003cbad\\u003e; 2 other ranks failed after it "
                  "(1 connection error, 1 stopped by its agent)\"},\"root\":{\"rank\":4,\"local_rank\":0,\"node\":\"c#3\","
                  "\"addr\":\"c\",\"host\":\"host-c\",\"round\":2,\"exit_code\":1,\"signal\":0,\"failed_at_unix_s\":100.000,"
                  "\"error_message\":\"ValueError: \\u003cbad\\u003e\",\"last_line\":\"ValueError: \\u003cbad\\u003e\","
                  "\"error_file\":\"\",\"stacks_file\":\"\",\"node_lost\":false,\"unhealthy\":false},\"consequences\":["
                  "{\"reason\":\"connection error\",\"ranks\":\"0\",\"workers\":1,\"nodes\":1,"
                  "\"min_after_s\":0.500,\"max_after_s\":0.500},"
                  "{\"reason\":\"stopped by its agent\",\"ranks\":\"5\",\"workers\":1,\"nodes\":1,"
                  "\"min_after_s\":0.500,\"max_after_s\":0.500}]}}]}\n") != std::string::npos);
}

TEST_CASE("RunsJson: a running round, a last call, and a run with no history") {
  Script s(Nodes(1, 3));
  s.Join("a");  // one node of 1..3: the last call is armed
  RunView forming = ViewOf(s.machine().Export(), s.machine().Tally(), s.At(seconds(0)));
  std::string json = RunsJson({RunStatus{"r", forming, nullptr}}, s.At(seconds(0)));
  CHECK(json.find("\"last_call_in_s\":30.000") != std::string::npos);
  CHECK(json.find("\"rounds_total\":0,\"rounds\":[],\"restarts_total\":0,\"restarts\":[]") != std::string::npos);
  s.Run(seconds(30));
  RunView running = ViewOf(s.machine().Export(), s.machine().Tally(), s.At(s.Elapsed()));
  json = RunsJson({RunStatus{"r", running, nullptr}, RunStatus{"s", running, nullptr}}, s.At(s.Elapsed()));
  CHECK(json.find("\"run_id\":\"r\",\"state\":\"running\",\"round\":0") != std::string::npos);
  CHECK(json.find("\"world_size\":1,\"last_call_in_s\":null") != std::string::npos);
  CHECK(json.find("{\"node\":\"a\",\"state\":\"member\",\"group_rank\":0,\"workers\":1") != std::string::npos);
  CHECK(json.find("},{\"run_id\":\"s\"") != std::string::npos);

  // A scale-up: a newcomer breaks the round; its cause reads as in ctrun_restarts_total.
  RunHistory h;
  s.Join("b");
  h.Add(s.last(), s.At(s.Elapsed()));
  RunView broken = ViewOf(s.machine().Export(), s.machine().Tally(), s.At(s.Elapsed()));
  json = RunsJson({RunStatus{"r", broken, &h}}, s.At(s.Elapsed()));
  CHECK(json.find("\"restarts\":[{\"round\":0,\"cause\":\"node_joined\",\"node\":\"b\",\"nodes\":[\"a\"]") !=
        std::string::npos);
}

}  // namespace
}  // namespace ctrun::rdzv::testing
