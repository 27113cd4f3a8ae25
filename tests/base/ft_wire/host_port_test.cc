// A host:port of the FT lines (base/ft_wire/host_port.h).
#include "base/ft_wire/host_port.h"

#include <catch2/catch.hpp>

namespace ctrun::ft_wire {
namespace {

TEST_CASE("host:port splits at the last colon", "[ft_wire][lines]") {
  auto v4 = ParseHostPort("127.0.0.1:80", "x");
  REQUIRE(v4.ok());
  CHECK(v4->host == "127.0.0.1");
  CHECK(v4->port == 80);
  auto v6 = ParseHostPort("[::1]:65535", "x");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->port == 65535);
  CHECK_FALSE(ParseHostPort(":80", "x").ok());
  CHECK_FALSE(ParseHostPort("[]:80", "x").ok());
  CHECK_FALSE(ParseHostPort("a:+80", "x").ok());
  CHECK_FALSE(ParseHostPort("a:", "x").ok());
  CHECK_THAT(ParseHostPort("a:0", "heal source").status().message(),
             Catch::Equals("heal source 'a:0' is not host:port"));
}

TEST_CASE("host:port is written host, colon, port", "[ft_wire][lines]") {
  CHECK(FormatHostPort("10.0.0.1", 4000) == "10.0.0.1:4000");
  CHECK(FormatHostPort("[::1]", 1) == "[::1]:1");
}

}  // namespace
}  // namespace ctrun::ft_wire
