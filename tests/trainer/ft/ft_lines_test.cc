// The worker <-> agent lines (trainer/ft/ft_lines.h): the text of `sync` and
// `healed`, and `quorum` answers parsed, or refused naming the field.
#include <catch2/catch.hpp>

#include <string>

#include "trainer/ft/ft_lines.h"

namespace ft = ctrun::trainer::ft;

namespace {

// The message of a refused quorum line.
std::string QuorumRefusal(const std::string& line) {
  auto parsed = ft::ParseQuorum(line);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == ctrun::Status::Code::kInvalidArgument);
  return parsed.status().message();
}

}  // namespace

TEST_CASE("sync lines carry the ballot or '-'", "[ft_lines]") {
  ft::SyncLine line{2, 17, 40001, 40002, ft::LineBallot{5, 16, true}};
  CHECK(ft::FormatSync(line) == "sync 2 17 40001 40002 5/16/1\n");
  line.ballot = ft::LineBallot{5, 16, false};
  CHECK(ft::FormatSync(line) == "sync 2 17 40001 40002 5/16/0\n");
  line.ballot->late = true;  // no, and it came late to the all-reduce
  CHECK(ft::FormatSync(line) == "sync 2 17 40001 40002 5/16/2\n");
  line.ballot.reset();
  CHECK(ft::FormatSync(line) == "sync 2 17 40001 40002 -\n");
}

TEST_CASE("healed lines give seconds to the millisecond", "[ft_lines]") {
  CHECK(ft::FormatHealed(ft::HealedLine{1, 42, "10.0.0.3:5000", 1048576, 1.23456}) ==
        "healed 1 42 10.0.0.3:5000 1048576 1.235\n");
}

TEST_CASE("a quorum answer parses into its fields", "[ft_lines]") {
  auto q = ft::ParseQuorum("quorum 1 7 1 3 42 10.0.0.3:4000 10.0.0.2:5000,[::1]:5001 1\n");
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

  auto alone = ft::ParseQuorum("quorum - 3 0 1 0 - - 0");
  REQUIRE(alone.ok());
  CHECK_FALSE(alone->commit.has_value());
  CHECK(alone->right_port == 0);
  CHECK(alone->right_host.empty());
  CHECK(alone->heal_sources.empty());
  CHECK_FALSE(alone->serve);

  auto v6 = ft::ParseQuorum("quorum 0 9 1 2 5 [fe80::1]:4000 - 0");
  REQUIRE(v6.ok());
  CHECK(v6->commit == std::optional<bool>(false));
  CHECK(v6->right_host == "fe80::1");
  CHECK(v6->right_port == 4000);
}

TEST_CASE("a malformed quorum answer is refused naming the field", "[ft_lines]") {
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

TEST_CASE("host:port splits at the last colon", "[ft_lines]") {
  auto v4 = ft::ParseHostPort("127.0.0.1:80", "x");
  REQUIRE(v4.ok());
  CHECK(v4->host == "127.0.0.1");
  CHECK(v4->port == 80);
  auto v6 = ft::ParseHostPort("[::1]:65535", "x");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->port == 65535);
  CHECK_FALSE(ft::ParseHostPort(":80", "x").ok());
  CHECK_FALSE(ft::ParseHostPort("[]:80", "x").ok());
  CHECK_FALSE(ft::ParseHostPort("a:+80", "x").ok());
  CHECK_FALSE(ft::ParseHostPort("a:", "x").ok());
}
