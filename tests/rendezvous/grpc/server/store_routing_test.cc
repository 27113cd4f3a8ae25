#include "rendezvous/grpc/server/store_routing.h"

#include <catch2/catch.hpp>

namespace ctrun::rdzv {
namespace {

TEST_CASE("a granted run gets the store connections from its members' addresses, and no others") {
  StoreRouting r;
  const StoreGrant g = r.Grant("a", {"10.0.0.1", "10.0.0.2"});
  CHECK(g.granted);
  CHECK(r.Holds("a"));
  CHECK(r.Route("10.0.0.1") == "a");
  CHECK(r.Route("10.0.0.2") == "a");
  CHECK_FALSE(r.Route("10.0.0.3").has_value());
}

TEST_CASE("a run on addresses of its own is granted beside another run") {
  StoreRouting r;
  REQUIRE(r.Grant("a", {"10.0.0.1"}).granted);
  CHECK(r.Grant("b", {"10.0.0.2", "10.0.0.3"}).granted);
  CHECK(r.Route("10.0.0.1") == "a");
  CHECK(r.Route("10.0.0.3") == "b");
}

TEST_CASE("a run sharing one address with a running run is not granted, holds nothing, and names the conflict") {
  StoreRouting r;
  REQUIRE(r.Grant("a", {"10.0.0.1", "10.0.0.2"}).granted);
  const StoreGrant g = r.Grant("b", {"10.0.0.3", "10.0.0.2"});
  CHECK_FALSE(g.granted);
  CHECK(g.conflict_ip == "10.0.0.2");
  CHECK(g.holder == "a");
  CHECK_FALSE(r.Holds("b"));
  CHECK_FALSE(r.Route("10.0.0.3").has_value());  // b's own address is not half-granted
  CHECK(r.Route("10.0.0.2") == "a");
}

TEST_CASE("released, a run's addresses route nowhere and another run may take them") {
  StoreRouting r;
  REQUIRE(r.Grant("a", {"10.0.0.1"}).granted);
  r.Release("a");
  CHECK_FALSE(r.Holds("a"));
  CHECK_FALSE(r.Route("10.0.0.1").has_value());
  CHECK(r.Grant("b", {"10.0.0.1"}).granted);
  CHECK(r.Route("10.0.0.1") == "b");
  r.Release("never-granted");  // ignored
  CHECK(r.Route("10.0.0.1") == "b");
}

TEST_CASE("a run's next round replaces its addresses (a node moved or left)") {
  StoreRouting r;
  REQUIRE(r.Grant("a", {"10.0.0.1", "10.0.0.2"}).granted);
  REQUIRE(r.Grant("a", {"10.0.0.2", "10.0.0.4"}).granted);  // its own old hold is no conflict
  CHECK_FALSE(r.Route("10.0.0.1").has_value());
  CHECK(r.Route("10.0.0.4") == "a");
}

TEST_CASE("a refused round drops the run's earlier hold too") {
  StoreRouting r;
  REQUIRE(r.Grant("a", {"10.0.0.1"}).granted);
  REQUIRE(r.Grant("b", {"10.0.0.2"}).granted);
  CHECK_FALSE(r.Grant("a", {"10.0.0.1", "10.0.0.2"}).granted);
  CHECK_FALSE(r.Holds("a"));
  CHECK_FALSE(r.Route("10.0.0.1").has_value());
}

}  // namespace
}  // namespace ctrun::rdzv
