#include "launcher/cli/hostlist.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace ctrun::launcher {
namespace {

using Hosts = std::vector<std::string>;

Hosts Expand(const std::string& list) {
  auto r = ExpandHostlist(list);
  INFO(list << ": " << (r.ok() ? "" : r.status().message()));
  REQUIRE(r.ok());
  return *r;
}

std::string Error(const std::string& list) {
  auto r = ExpandHostlist(list);
  INFO(list);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  return r.status().message();
}

TEST_CASE("a plain name and a plain list") {
  CHECK(Expand("node7") == Hosts{"node7"});
  CHECK(Expand("a,b,c") == Hosts{"a", "b", "c"});
  CHECK(Expand("a b\tc") == Hosts{"a", "b", "c"});
  CHECK(Expand("gpu-node.example_1") == Hosts{"gpu-node.example_1"});
}

TEST_CASE("ranges and single numbers inside one bracket group") {
  CHECK(Expand("n[1-3,5]") == Hosts{"n1", "n2", "n3", "n5"});
  CHECK(Expand("n[7]") == Hosts{"n7"});
  CHECK(Expand("n[3-3]") == Hosts{"n3"});
}

TEST_CASE("commas inside brackets do not split hosts") {
  CHECK(Expand("gpu[01-02],cpu7") == Hosts{"gpu01", "gpu02", "cpu7"});
  CHECK(Expand("a[1,3],b[2-3],c") == Hosts{"a1", "a3", "b2", "b3", "c"});
}

TEST_CASE("zero padding follows the width of the lower bound") {
  CHECK(Expand("n[08-11]") == Hosts{"n08", "n09", "n10", "n11"});
  CHECK(Expand("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(Expand("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(Expand("n[001-002,7]") == Hosts{"n001", "n002", "n7"});
  CHECK(Expand("n[9-010]") == Hosts{"n9", "n10"});
}

TEST_CASE("several bracket groups multiply out, the leftmost slowest") {
  CHECK(Expand("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(Expand("rack[1,3]-gpu[01-02].ib") ==
        Hosts{"rack1-gpu01.ib", "rack1-gpu02.ib", "rack3-gpu01.ib", "rack3-gpu02.ib"});
  CHECK(Expand("[1-2]x") == Hosts{"1x", "2x"});
}

TEST_CASE("duplicates are kept in order") { CHECK(Expand("n[1-2],n1") == Hosts{"n1", "n2", "n1"}); }

TEST_CASE("FirstHost returns the first expanded name") {
  auto first = FirstHost("gpu[03-04],cpu1");
  REQUIRE(first.ok());
  CHECK(*first == "gpu03");
  CHECK_FALSE(FirstHost("n[2-1]").ok());
}

TEST_CASE("malformed lists say what is wrong and how to write one") {
  CHECK_THAT(Error(""), Catch::Contains("empty") && Catch::Contains("e.g. n[1-3,5]"));
  CHECK_THAT(Error("n[1-3"), Catch::Contains("brackets"));
  CHECK_THAT(Error("n1-3]"), Catch::Contains("brackets"));
  CHECK_THAT(Error("n]1[x"), Catch::Contains("']' without '['"));
  CHECK_THAT(Error("n[1-[2]]"), Catch::Contains("nested"));
  CHECK_THAT(Error("n[]"), Catch::Contains("empty brackets"));
  CHECK_THAT(Error("n[1,,2]"), Catch::Contains("empty item"));
  CHECK_THAT(Error("n[a-c]"), Catch::Contains("'a-c' is not a number"));
  CHECK_THAT(Error("n[1-]"), Catch::Contains("'1-' is not a number"));
  CHECK_THAT(Error("n[-2]"), Catch::Contains("'-2' is not a number"));
  CHECK_THAT(Error("n[5-2]"), Catch::Contains("'5-2' runs backwards"));
  CHECK_THAT(Error("n1,,n2"), Catch::Contains("empty host name"));
  CHECK_THAT(Error("n/1"), Catch::Contains("'/' is not a host name character"));
  CHECK_THAT(Error("n[1-99999999999999]"), Catch::Contains("more than"));
  CHECK_THAT(Error("a[1-1000]b[1-1001]"), Catch::Contains("more than"));
}

}  // namespace
}  // namespace ctrun::launcher
