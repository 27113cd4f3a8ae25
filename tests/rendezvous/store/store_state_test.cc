// StoreState: requests from numbered clients in, reply bytes and woken
// waiters out.
#include "rendezvous/store/store_state.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "tests/rendezvous/store/store_request.h"

namespace ctrun::rdzv {
namespace {

using testing::Req;

std::string Bytes(const std::string& s) {
  std::string out;
  AppendStoreBytes(out, s);
  return out;
}
std::string Int(int64_t v) {
  std::string out;
  AppendStoreInt64(out, v);
  return out;
}

// A store and the replies of the last request.
struct Fixture {
  StoreState state;
  std::string reply;
  std::vector<StoreClientId> woken;
  Status Do(StoreClientId client, const StoreRequest& r) {
    reply.clear();
    woken.clear();
    return state.Apply(client, r, reply, woken);
  }
};

TEST_CASE("set, get, num_keys, delete") {
  Fixture f;
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"k"}, {"v"})).ok());
  CHECK(f.reply.empty());
  REQUIRE(f.Do(1, Req(StoreOp::kGet, {"k"})).ok());
  CHECK(f.reply == Bytes("v"));
  REQUIRE(f.Do(1, Req(StoreOp::kNumKeys)).ok());
  CHECK(f.reply == Int(1));
  REQUIRE(f.Do(1, Req(StoreOp::kDeleteKey, {"k"})).ok());
  CHECK(f.reply == Int(1));
  REQUIRE(f.Do(1, Req(StoreOp::kDeleteKey, {"k"})).ok());
  CHECK(f.reply == Int(0));
  CHECK(f.Do(1, Req(StoreOp::kGet, {"k"})).IsNotFound());
}

TEST_CASE("a request applied by move writes the same as one applied by copy") {
  Fixture f;
  StoreRequest set = Req(StoreOp::kSet, {"k"}, {std::string(100000, 'v')});
  REQUIRE(f.state.Apply(1, std::move(set), f.reply, f.woken).ok());
  StoreRequest cas = Req(StoreOp::kCompareSet, {"k"}, {std::string(100000, 'v'), "w"});
  f.reply.clear();
  REQUIRE(f.state.Apply(1, std::move(cas), f.reply, f.woken).ok());
  CHECK(f.reply == Bytes("w"));
  REQUIRE(f.Do(1, Req(StoreOp::kGet, {"k"})).ok());
  CHECK(f.reply == Bytes("w"));
}

TEST_CASE("add counts from zero and refuses a non-number") {
  Fixture f;
  REQUIRE(f.Do(1, Req(StoreOp::kAdd, {"n"}, {}, 5)).ok());
  CHECK(f.reply == Int(5));
  REQUIRE(f.Do(1, Req(StoreOp::kAdd, {"n"}, {}, -7)).ok());
  CHECK(f.reply == Int(-2));
  REQUIRE(f.Do(1, Req(StoreOp::kGet, {"n"})).ok());
  CHECK(f.reply == Bytes("-2"));
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"s"}, {"abc"})).ok());
  CHECK(f.Do(1, Req(StoreOp::kAdd, {"s"}, {}, 1)).IsInvalidArgument());
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"big"}, {"9223372036854775807"})).ok());
  CHECK(f.Do(1, Req(StoreOp::kAdd, {"big"}, {}, 1)).IsInvalidArgument());
}

TEST_CASE("compare_set as torch's server answers it") {
  Fixture f;
  // Missing key, non-empty expected: nothing written, expected returned.
  REQUIRE(f.Do(1, Req(StoreOp::kCompareSet, {"k"}, {"a", "b"})).ok());
  CHECK(f.reply == Bytes("a"));
  CHECK(f.state.num_keys() == 0);
  // Missing key, empty expected: desired written.
  REQUIRE(f.Do(1, Req(StoreOp::kCompareSet, {"k"}, {"", "b"})).ok());
  CHECK(f.reply == Bytes("b"));
  // Match: written; mismatch: current value returned.
  REQUIRE(f.Do(1, Req(StoreOp::kCompareSet, {"k"}, {"b", "c"})).ok());
  CHECK(f.reply == Bytes("c"));
  REQUIRE(f.Do(1, Req(StoreOp::kCompareSet, {"k"}, {"x", "d"})).ok());
  CHECK(f.reply == Bytes("c"));
}

TEST_CASE("a wait is answered when the last of its keys is written") {
  Fixture f;
  REQUIRE(f.Do(2, Req(StoreOp::kWait, {"a", "b"})).ok());
  CHECK(f.reply.empty());
  CHECK(f.state.num_waits() == 1);
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"a"}, {"1"})).ok());
  CHECK(f.woken.empty());
  REQUIRE(f.Do(1, Req(StoreOp::kAdd, {"b"}, {}, 1)).ok());
  CHECK(f.woken == std::vector<StoreClientId>{2});
  CHECK(f.state.num_waits() == 0);
  // Keys that exist: answered at once.
  REQUIRE(f.Do(2, Req(StoreOp::kWait, {"a", "b"})).ok());
  CHECK(f.reply == std::string(1, static_cast<char>(kStoreStopWaiting)));
}

TEST_CASE("append, multi_set and a writing compare_set wake waiters too") {
  Fixture f;
  REQUIRE(f.Do(2, Req(StoreOp::kWait, {"x"})).ok());
  REQUIRE(f.Do(3, Req(StoreOp::kWait, {"y"})).ok());
  REQUIRE(f.Do(4, Req(StoreOp::kWait, {"z"})).ok());
  REQUIRE(f.Do(1, Req(StoreOp::kAppend, {"x"}, {"ab"})).ok());
  CHECK(f.woken == std::vector<StoreClientId>{2});
  REQUIRE(f.Do(1, Req(StoreOp::kAppend, {"x"}, {"cd"})).ok());
  REQUIRE(f.Do(1, Req(StoreOp::kMultiSet, {"y", "w"}, {"1", "2"})).ok());
  CHECK(f.woken == std::vector<StoreClientId>{3});
  REQUIRE(f.Do(1, Req(StoreOp::kCompareSet, {"z"}, {"", "v"})).ok());
  CHECK(f.woken == std::vector<StoreClientId>{4});
  REQUIRE(f.Do(1, Req(StoreOp::kMultiGet, {"x", "w"})).ok());
  CHECK(f.reply == Bytes("abcd") + Bytes("2"));
  CHECK(f.Do(1, Req(StoreOp::kMultiGet, {"x", "nope"})).IsNotFound());
}

TEST_CASE("check, cancel_wait, ping, disconnect and clear") {
  Fixture f;
  REQUIRE(f.Do(1, Req(StoreOp::kCheck, {"a"})).ok());
  CHECK(f.reply == std::string(1, static_cast<char>(kStoreCheckNotReady)));
  REQUIRE(f.Do(2, Req(StoreOp::kWait, {"a"})).ok());
  REQUIRE(f.Do(2, Req(StoreOp::kCancelWait)).ok());
  CHECK(f.reply == std::string(1, static_cast<char>(kStoreWaitCanceled)));
  REQUIRE(f.Do(3, Req(StoreOp::kWait, {"a"})).ok());
  f.state.Disconnect(3);
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"a"}, {"1"})).ok());
  CHECK(f.woken.empty());
  REQUIRE(f.Do(1, Req(StoreOp::kCheck, {"a"})).ok());
  CHECK(f.reply == std::string(1, static_cast<char>(kStoreCheckReady)));
  REQUIRE(f.Do(1, Req(StoreOp::kPing, {}, {}, 0xABCD)).ok());
  std::string nonce;
  AppendStoreUint32(nonce, 0xABCD);
  CHECK(f.reply == nonce);
  REQUIRE(f.Do(4, Req(StoreOp::kWait, {"b"})).ok());
  f.state.Clear();
  CHECK(f.state.num_keys() == 0);
  CHECK(f.state.num_waits() == 0);
}

}  // namespace
}  // namespace ctrun::rdzv
