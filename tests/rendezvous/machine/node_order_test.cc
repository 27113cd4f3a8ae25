#include "rendezvous/machine/node_order.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

std::vector<std::string> NaturalSorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
  return v;
}

TEST_CASE("NaturalLess puts node9 before node10") {
  CHECK(NaturalLess("node9", "node10"));
  CHECK_FALSE(NaturalLess("node10", "node9"));
}

TEST_CASE("NaturalLess orders IPv4 addresses by each number") {
  CHECK(NaturalLess("10.0.0.9", "10.0.0.10"));
  CHECK(NaturalLess("10.0.0.200", "10.0.1.1"));
  CHECK(NaturalLess("9.255.255.255", "10.0.0.0"));
}

TEST_CASE("NaturalLess sorts a mixed host list") {
  CHECK(NaturalSorted({"node10", "node2", "node1", "gpu-a12", "gpu-a3", "node10a", "node10-1"}) ==
        std::vector<std::string>{"gpu-a3", "gpu-a12", "node1", "node2", "node10", "node10-1", "node10a"});
}

TEST_CASE("NaturalLess: a prefix comes first") {
  CHECK(NaturalLess("node", "node1"));
  CHECK(NaturalLess("a", "a0"));
  CHECK(NaturalLess("", "a"));
  CHECK_FALSE(NaturalLess("a", ""));
}

TEST_CASE("NaturalLess: equal strings are not less") {
  CHECK_FALSE(NaturalLess("node7", "node7"));
  CHECK_FALSE(NaturalLess("", ""));
}

TEST_CASE("NaturalLess: leading zeros tie-break shorter first, so the order stays total") {
  CHECK(NaturalLess("a1", "a01"));
  CHECK(NaturalLess("a01", "a001"));
  CHECK_FALSE(NaturalLess("a01", "a1"));
  // The numeric value still decides before zeros do.
  CHECK(NaturalLess("a001", "a2"));
  // Later text decides before an earlier leading-zero tie.
  CHECK(NaturalLess("a01b", "a1c"));
}

TEST_CASE("NaturalLess compares huge digit runs without overflow") {
  CHECK(NaturalLess("n99999999999999999999999", "n100000000000000000000000"));
  CHECK_FALSE(NaturalLess("n100000000000000000000000", "n99999999999999999999999"));
}

TEST_CASE("NaturalLess: a digit run against punctuation compares as a digit byte") {
  CHECK(NaturalLess("a-x", "a1"));   // '-' < '0'
  CHECK(NaturalLess("a5", "a:x"));   // '0'..'9' < ':'
  CHECK(NaturalLess("a99", "a:x"));
}

TEST_CASE("NaturalLess is case sensitive, bytewise outside digits") {
  CHECK(NaturalLess("B", "a"));
  CHECK(NaturalLess("node", "nodf"));
}

TEST_CASE("NaturalLess is a strict total order on a sample") {
  std::vector<std::string> v = {"", "a", "a0", "a00", "a1", "a01", "a10", "a-1", "b", "10.0.0.9", "10.0.0.10", "x1y2"};
  for (const auto& a : v) {
    CHECK_FALSE(NaturalLess(a, a));
    for (const auto& b : v) {
      if (a != b) CHECK(NaturalLess(a, b) != NaturalLess(b, a));
      for (const auto& c : v) {
        if (NaturalLess(a, b) && NaturalLess(b, c)) CHECK(NaturalLess(a, c));
      }
    }
  }
}

TEST_CASE("NodeLess: host first, then pid, then local id") {
  CHECK(NodeLess({"node9", 500, 0}, {"node10", 1, 0}));
  CHECK(NodeLess({"node9", 1, 5}, {"node9", 2, 0}));
  CHECK(NodeLess({"node9", 1, 0}, {"node9", 1, 1}));
  CHECK_FALSE(NodeLess({"node9", 1, 1}, {"node9", 1, 1}));
}

TEST_CASE("ToString shows pid and local id only when set") {
  CHECK(ToString({"node3", 0, 0}) == "node3");
  CHECK(ToString({"node3", 4242, 0}) == "node3#4242");
  CHECK(ToString({"node3", 4242, 1}) == "node3#4242.1");
}

}  // namespace
}  // namespace ctrun::rdzv
