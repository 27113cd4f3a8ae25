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

// --- failures no restart fixes (RestartPolicy::Decision::unfixable)

FailureSignature Raised(int rank, const std::string& error, std::optional<uint64_t> steps) {
  return FailureSignature{rank, rdzv::FailureClass::kPythonException, error, "  File \"train.py\", line 9", steps};
}

AttemptEnd Failed(std::optional<FailureSignature> failure) {
  AttemptEnd a = Crash(30);
  a.failure = std::move(failure);
  return a;
}

TEST_CASE("restart policy: a bad launch is not restarted, unless --restart-on-any-failure") {
  AttemptEnd bad = Crash(0);
  bad.bad_launch = true;
  const RestartPolicy::Decision d = RestartPolicy(Backoff(0)).OnAttemptEnd(bad);
  CHECK(d.unfixable == "every rank failed within 1 s of its start with the same error: the launch cannot work");
  RestartPolicyConfig anyway = Backoff(0);
  anyway.restart_unfixable = true;
  CHECK(RestartPolicy(anyway).OnAttemptEnd(bad).unfixable.empty());
}

TEST_CASE("restart policy: the same error at the same step twice in a row is not restarted again") {
  RestartPolicy p(Backoff(0));
  CHECK(p.OnAttemptEnd(Failed(Raised(3, "ValueError: bad shape", 120))).unfixable.empty());
  CHECK(p.OnAttemptEnd(Failed(Raised(3, "ValueError: bad shape", 120))).unfixable ==
        "rank 3 failed twice in a row with the same error at the same step (120 steps in): ValueError: bad shape");
}

TEST_CASE("restart policy: progress, another rank, another error or a membership change in between restart again") {
  RestartPolicy p(Backoff(0));
  CHECK(p.OnAttemptEnd(Failed(Raised(3, "ValueError: bad shape", 120))).unfixable.empty());
  CHECK(p.OnAttemptEnd(Failed(Raised(3, "ValueError: bad shape", 121))).unfixable.empty());  // progress
  CHECK(p.OnAttemptEnd(Failed(Raised(2, "ValueError: bad shape", 121))).unfixable.empty());  // another rank
  CHECK(p.OnAttemptEnd(Failed(Raised(2, "KeyError: 'x'", 121))).unfixable.empty());          // another error
  CHECK(p.OnAttemptEnd(Membership()).unfixable.empty());
  CHECK(p.OnAttemptEnd(Failed(Raised(2, "KeyError: 'x'", 121))).unfixable.empty());  // not in a row
  CHECK_FALSE(p.OnAttemptEnd(Failed(Raised(2, "KeyError: 'x'", 121))).unfixable.empty());
}

TEST_CASE("restart policy: without steps, the same error on the same rank is the same failure") {
  RestartPolicy p(Backoff(0));
  CHECK(p.OnAttemptEnd(Failed(Raised(0, "RuntimeError: x", std::nullopt))).unfixable.empty());
  CHECK(p.OnAttemptEnd(Failed(Raised(0, "RuntimeError: x", std::nullopt))).unfixable ==
        "rank 0 failed twice in a row with the same error: RuntimeError: x");
}

TEST_CASE("restart policy: a lost connection or NCCL twice is a peer's doing: restarted") {
  RestartPolicy p(Backoff(0));
  FailureSignature lost = Raised(1, "RuntimeError: Connection reset by peer", 5);
  lost.cls = rdzv::FailureClass::kConnectionError;
  CHECK(p.OnAttemptEnd(Failed(lost)).unfixable.empty());
  CHECK(p.OnAttemptEnd(Failed(lost)).unfixable.empty());
  FailureSignature nccl = lost;
  nccl.cls = rdzv::FailureClass::kNcclError;
  CHECK(p.OnAttemptEnd(Failed(nccl)).unfixable.empty());
  CHECK(p.OnAttemptEnd(Failed(nccl)).unfixable.empty());
}

TEST_CASE("restart policy: an attempt's failures give its bad launch and its root's signature") {
  rdzv::WorkerFailureInfo a;
  a.rank = 4;
  a.exit_code = 1;
  a.runtime_s = 0.05;
  a.error_message = "SyntaxError: invalid syntax";
  a.last_line = "SyntaxError: invalid syntax";
  a.failed_at_unix_s = 10;
  rdzv::WorkerFailureInfo b = a;
  b.rank = 5;
  b.failed_at_unix_s = 10.01;
  AttemptEnd end;
  NoteAttemptFailures({a, b}, {std::nullopt, 7}, 2, end);
  CHECK(end.bad_launch);
  REQUIRE(end.failure);
  CHECK(*end.failure == FailureSignature{4, rdzv::FailureClass::kPythonException, "SyntaxError: invalid syntax",
                                         "SyntaxError: invalid syntax", std::nullopt});
  // Stopped by the agent: a consequence, no signature.
  rdzv::WorkerFailureInfo stopped = a;
  stopped.stopped_by_agent = true;
  AttemptEnd none;
  NoteAttemptFailures({stopped}, {3}, 2, none);
  CHECK_FALSE(none.bad_launch);
  CHECK_FALSE(none.failure);
  // One that ran longer is no bad launch; its steps are kept.
  b.runtime_s = 30;
  AttemptEnd later;
  NoteAttemptFailures({b}, {7}, 1, later);
  CHECK_FALSE(later.bad_launch);
  REQUIRE(later.failure);
  CHECK(later.failure->steps == 7u);
}

}  // namespace
}  // namespace ctrun::launcher
