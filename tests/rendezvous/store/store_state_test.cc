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

TEST_CASE("abandoned and canceled waits leave no per-key entries behind") {
  Fixture f;
  // A client waiting on many keys, then leaving.
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back("k" + std::to_string(i));
  REQUIRE(f.Do(2, Req(StoreOp::kWait, keys)).ok());
  REQUIRE(f.Do(2, Req(StoreOp::kWait, {"k1", "other"})).ok());
  REQUIRE(f.Do(3, Req(StoreOp::kWait, {"k1"})).ok());
  CHECK(f.state.num_waits() == 3);
  CHECK(f.state.num_waited_keys() == 1001);
  f.state.Disconnect(2);
  CHECK(f.state.num_waits() == 1);
  CHECK(f.state.num_waited_keys() == 1);  // k1, client 3's
  // CANCEL_WAIT drops them the same way; a key written since is no trouble.
  REQUIRE(f.Do(4, Req(StoreOp::kWait, {"x", "y", "x"})).ok());
  CHECK(f.state.num_waited_keys() == 3);
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"x"}, {"1"})).ok());
  CHECK(f.woken.empty());
  CHECK(f.state.num_waited_keys() == 2);
  REQUIRE(f.Do(4, Req(StoreOp::kCancelWait)).ok());
  REQUIRE(f.Do(3, Req(StoreOp::kCancelWait)).ok());
  CHECK(f.state.num_waits() == 0);
  CHECK(f.state.num_waited_keys() == 0);
  // A woken wait leaves nothing either; its client's later leaving is a no-op.
  REQUIRE(f.Do(5, Req(StoreOp::kWait, {"p", "q"})).ok());
  REQUIRE(f.Do(1, Req(StoreOp::kMultiSet, {"p", "q"}, {"1", "2"})).ok());
  CHECK(f.woken == std::vector<StoreClientId>{5});
  CHECK(f.state.num_waits() == 0);
  CHECK(f.state.num_waited_keys() == 0);
  f.state.Disconnect(5);
  CHECK(f.state.num_waits() == 0);
}

TEST_CASE("a MULTI_GET whose reply would be over 64 MiB is refused before it is built") {
  Fixture f;
  REQUIRE(f.Do(1, Req(StoreOp::kSet, {"big"}, {std::string(32 << 10, 'v')})).ok());
  CHECK(f.state.largest_value() == (32u << 10));
  // 2048 x (8 + 32 KiB) is just over 64 MiB; 2047 is under it.
  REQUIRE(f.Do(1, Req(StoreOp::kMultiGet, std::vector<std::string>(2047, "big"))).ok());
  CHECK(f.reply.size() == 2047 * (8 + (32u << 10)));
  const Status refused = f.Do(1, Req(StoreOp::kMultiGet, std::vector<std::string>(2048, "big")));
  CHECK(refused.code() == Status::Code::kResourceExhausted);
  CHECK(refused.message().find("the limit is 67108864") != std::string::npos);
  CHECK(f.reply.empty());
  f.state.Clear();
  CHECK(f.state.largest_value() == 0);
}

}  // namespace
}  // namespace ctrun::rdzv
