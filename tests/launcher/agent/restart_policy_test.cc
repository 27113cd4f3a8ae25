// RestartPolicy: attempts in, decisions out; durations given by hand.
#include "launcher/agent/restart_policy.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

using std::chrono::seconds;

RestartPolicyConfig Backoff(int s) {
  RestartPolicyConfig c;
  c.backoff = seconds(s);
  c.min_healthy_uptime = seconds(60);
  return c;
}

AttemptEnd Crash(int uptime_s) {
  AttemptEnd a;
  a.uptime = seconds(uptime_s);
  return a;
}

AttemptEnd Membership() {
  AttemptEnd a;
  a.membership_changed = true;
  return a;
}

TEST_CASE("restart policy: no backoff restarts at once") {
  RestartPolicy p(Backoff(0));
  for (int i = 0; i < 3; ++i) {
    RestartPolicy::Decision d = p.OnAttemptEnd(Crash(1));
    CHECK_FALSE(d.stop_at_startup);
    CHECK(d.delay == Duration::zero());
  }
}

TEST_CASE("restart policy: the backoff doubles per quick crash up to 32x") {
  RestartPolicy p(Backoff(2));
  for (int expected : {2, 4, 8, 16, 32, 64, 64, 64}) {
    CHECK(p.OnAttemptEnd(Crash(1)).delay == seconds(expected));
  }
}

TEST_CASE("restart policy: a healthy run resets the backoff") {
  RestartPolicy p(Backoff(1));
  CHECK(p.OnAttemptEnd(Crash(1)).delay == seconds(1));
  CHECK(p.OnAttemptEnd(Crash(1)).delay == seconds(2));
  CHECK(p.OnAttemptEnd(Crash(60)).delay == seconds(1));
  CHECK(p.OnAttemptEnd(Crash(59)).delay == seconds(2));
}

TEST_CASE("restart policy: a membership change is never delayed and leaves the backoff as it was") {
  RestartPolicy p(Backoff(1));
  CHECK(p.OnAttemptEnd(Crash(1)).delay == seconds(1));
  CHECK(p.OnAttemptEnd(Membership()).delay == Duration::zero());
  CHECK(p.OnAttemptEnd(Crash(1)).delay == seconds(2));
}

TEST_CASE("restart policy: fail-fast stops the first attempt's quick crash only") {
  RestartPolicyConfig c = Backoff(0);
  c.fail_fast_on_startup = true;
  CHECK(RestartPolicy(c).OnAttemptEnd(Crash(59)).stop_at_startup);
  CHECK_FALSE(RestartPolicy(c).OnAttemptEnd(Crash(60)).stop_at_startup);
  CHECK_FALSE(RestartPolicy(c).OnAttemptEnd(Membership()).stop_at_startup);

  RestartPolicy after_healthy(c);
  CHECK_FALSE(after_healthy.OnAttemptEnd(Crash(600)).stop_at_startup);
  CHECK_FALSE(after_healthy.OnAttemptEnd(Crash(1)).stop_at_startup);  // not the first attempt

  RestartPolicy after_membership(c);
  after_membership.OnAttemptEnd(Membership());
  CHECK_FALSE(after_membership.OnAttemptEnd(Crash(1)).stop_at_startup);
}

TEST_CASE("restart policy: off by default, fail-fast never stops") {
  RestartPolicy p(Backoff(0));
  CHECK_FALSE(p.OnAttemptEnd(Crash(0)).stop_at_startup);
}

TEST_CASE("restart policy: with a heartbeat, progress is a touch, not the uptime") {
  RestartPolicyConfig c = Backoff(0);
  c.fail_fast_on_startup = true;
  c.heartbeat_on = true;
  AttemptEnd long_silent = Crash(3600);
  CHECK(RestartPolicy(c).OnAttemptEnd(long_silent).stop_at_startup);
  AttemptEnd touched = Crash(1);
  touched.heartbeat_touched = true;
  CHECK_FALSE(RestartPolicy(c).OnAttemptEnd(touched).stop_at_startup);
}

}  // namespace
}  // namespace ctrun::launcher
