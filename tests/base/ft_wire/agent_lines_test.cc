// The lines an agent sends its workers (base/ft_wire/agent_lines.h): the
// text the agent writes, and the worker's parse of it, refused naming the
// field.
#include "base/ft_wire/agent_lines.h"

#include <catch2/catch.hpp>
#include <string>

#include "base/ft_wire/fields.h"

namespace ctrun::ft_wire {
namespace {

// The message of a refused quorum line.
std::string QuorumRefusal(const std::string& line) {
  auto parsed = ParseQuorum(line);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == Status::Code::kInvalidArgument);
  return parsed.status().message();
}

TEST_CASE("the agent's lines", "[ft_wire][lines]") {
  QuorumLine a{.commit = true, .quorum_id = 4, .replica_rank = 1, .replica_world = 3, .max_step = 9,
               .right_host = "10.0.0.2", .right_port = 5000, .heal_sources = {}, .serve = true};
  CHECK(FormatQuorum(a) == "quorum 1 4 1 3 9 10.0.0.2:5000 - 1\n");
  a.commit.reset();
  a.right_host.clear();
  a.right_port = 0;
  a.heal_sources = {"h1:1", "h2:2"};
  a.serve = false;
  CHECK(FormatQuorum(a) == "quorum - 4 1 3 9 - h1:1,h2:2 0\n");
  a.right_host = "[fe80::1]";  // as the agent keeps it: in brackets
  a.right_port = 4000;
  CHECK(FormatQuorum(a) == "quorum - 4 1 3 9 [fe80::1]:4000 h1:1,h2:2 0\n");
  CHECK(FormatAbort("group g\nlost") == "abort group g lost\n");
  const std::string long_error = FormatError(std::string(10000, 'x'));
  CHECK(long_error.size() <= kMaxLineBytes);
  CHECK(long_error.back() == '\n');
  CHECK(FormatFinished(14) == "finished 14\n");
  CHECK(FormatBye() == "bye\n");
}

TEST_CASE("a quorum answer parses into its fields", "[ft_wire][lines]") {
  auto q = ParseQuorum("quorum 1 7 1 3 42 10.0.0.3:4000 10.0.0.2:5000,[::1]:5001 1\n");
  REQUIRE(q.ok());
  CHECK(q->commit == std::optional<bool>(true));
  CHECK(q->quorum_id == 7);
  CHECK(q->replica_rank == 1);
  CHECK(q->replica_world == 3);
  CHECK(q->max_step == 42);
  CHECK(q->right_host == "10.0.0.3");
  CHECK(q->right_port == 4000);
  CHECK(q->heal_sources == std::vector<std::string>{"10.0.0.2:5000", "[::1]:5001"});
  CHECK(q->serve);

  auto alone = ParseQuorum("quorum - 3 0 1 0 - - 0");
  REQUIRE(alone.ok());
  CHECK_FALSE(alone->commit.has_value());
  CHECK(alone->right_port == 0);
  CHECK(alone->right_host.empty());
  CHECK(alone->heal_sources.empty());
  CHECK_FALSE(alone->serve);

  auto v6 = ParseQuorum("quorum 0 9 1 2 5 [fe80::1]:4000 - 0");
  REQUIRE(v6.ok());
  CHECK(v6->commit == std::optional<bool>(false));
  CHECK(v6->right_host == "fe80::1");
  CHECK(v6->right_port == 4000);
}

TEST_CASE("a quorum line reads back as written", "[ft_wire][lines]") {
  for (const QuorumLine& line :
       {QuorumLine{.commit = true, .quorum_id = 4, .replica_rank = 1, .replica_world = 3, .max_step = 9,
                   .right_host = "10.0.0.2", .right_port = 5000, .heal_sources = {"h1:1", "h2:2"}, .serve = true},
        QuorumLine{.commit = std::nullopt, .quorum_id = 1, .replica_rank = 0, .replica_world = 1, .max_step = 0,
                   .right_host = "", .right_port = 0, .heal_sources = {}, .serve = false}}) {
    auto back = ParseQuorum(FormatQuorum(line));
    REQUIRE(back.ok());
    CHECK(*back == line);
  }
}

TEST_CASE("a malformed quorum answer is refused naming the field", "[ft_wire][lines]") {
  CHECK_THAT(QuorumRefusal("sync 0 1 2 3 -"), Catch::Contains("does not start with 'quorum'"));
  CHECK_THAT(QuorumRefusal(""), Catch::Contains("does not start with 'quorum'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7"), Catch::Contains("no replica_rank"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 0 - -"), Catch::Contains("no serve"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 0 - - 0 more"), Catch::Contains("extra text 'more'"));
  CHECK_THAT(QuorumRefusal("quorum yes 7 0 1 0 - - 0"), Catch::Contains("commit 'yes'"));
  CHECK_THAT(QuorumRefusal("quorum 1 0 0 1 0 - - 0"), Catch::Contains("quorum_id '0'"));
  CHECK_THAT(QuorumRefusal("quorum 1 x7 0 1 0 - - 0"), Catch::Contains("quorum_id 'x7'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 0 0 - - 0"), Catch::Contains("replica_world '0'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 2 2 0 a:1 - 0"), Catch::Contains("replica_rank '2'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 -1 - - 0"), Catch::Contains("max_step '-1'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 2 3 - - 0"), Catch::Contains("right '-'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 3 10.0.0.1:4000 - 0"), Catch::Contains("right '10.0.0.1:4000'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 2 3 10.0.0.1:99999 - 0"), Catch::Contains("right '10.0.0.1:99999'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 2 3 10.0.0.1 - 0"), Catch::Contains("right '10.0.0.1'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 3 - a:1,,b:2 0"), Catch::Contains("heal source ''"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 3 - a:0 0"), Catch::Contains("heal source 'a:0'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 3 - - 2"), Catch::Contains("serve '2'"));
  CHECK_THAT(QuorumRefusal("quorum 1 7 0 1 3 - -\r 0"), Catch::Contains("control character"));
}

TEST_CASE("finished, abort and error lines read by their verb", "[ft_wire][lines]") {
  CHECK(ParseFinished("finished 14") == std::optional<int64_t>(14));
  CHECK(ParseFinished("finished 0") == std::optional<int64_t>(0));
  CHECK_FALSE(ParseFinished("finished").has_value());
  CHECK_FALSE(ParseFinished("finished -1").has_value());
  CHECK_FALSE(ParseFinished("finished 3x").has_value());
  CHECK(VerbIs("abort group-2 was lost", "abort"));
  CHECK(VerbIs("bye", "bye"));
  CHECK_FALSE(VerbIs("byebye", "bye"));
  CHECK_FALSE(VerbIs("quorum", "quorum 1"));
  CHECK(TextAfterVerb("abort group-2 was lost", "abort") == "group-2 was lost");
  CHECK(TextAfterVerb("error", "error").empty());
  CHECK(TextAfterVerb("error ", "error").empty());
}

}  // namespace
}  // namespace ctrun::ft_wire
