// StoreParser: torch's TCPStore requests, byte for byte, in both dialects;
// split at every offset; malformed and oversized streams refused.
#include "rendezvous/store/store_protocol.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>

#include "tests/rendezvous/store/store_request.h"

namespace ctrun::rdzv {
namespace {

// The wire vocabulary: Str("k") is a uint64 length + bytes.
std::string U8(uint8_t v) { return std::string(1, static_cast<char>(v)); }
template <typename T>
std::string Le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
std::string Str(const std::string& s) { return Le<uint64_t>(s.size()) + s; }
std::string Validate() { return U8(0) + Le<uint32_t>(kStoreValidateMagic); }

// Feeds `bytes` in one piece and returns every request, failing the test on
// an error.
std::vector<StoreRequest> ParseAll(StoreParser& p, const std::string& bytes) {
  p.Feed(bytes.data(), bytes.size());
  std::vector<StoreRequest> out;
  for (;;) {
    auto r = p.Next();
    REQUIRE(r.ok());
    if (!*r) return out;
    out.push_back(std::move(**r));
  }
}

Status ParseError(const std::string& bytes, StoreLimits limits = {}) {
  StoreParser p(limits);
  p.Feed(bytes.data(), bytes.size());
  for (;;) {
    auto r = p.Next();
    if (!r.ok()) return r.status();
    if (!*r) return Status::Ok();
  }
}

TEST_CASE("torch 1.13 requests as its client sends them") {
  // Captured from torch 1.13.1's python TCPStore (keys carry its "/" prefix).
  StoreParser p;
  auto reqs = ParseAll(p, U8(0) + Str("/k") + Str("v") +                 // set
                              U8(5) + Le<uint64_t>(1) + Str("/k") +      // wait (get's first half)
                              U8(2) + Str("/k") +                        // get
                              U8(3) + Str("/n") + Le<int64_t>(5) +       // add
                              U8(1) + Str("/k") + Str("v") + Str("w") +  // compare_set
                              U8(4) + Le<uint64_t>(2) + Str("/a") + Str("/b") +  // check
                              U8(6) +                                    // num_keys
                              U8(8) + Str("/k"));                        // delete_key
  REQUIRE(reqs.size() == 8);
  CHECK(p.dialect() == StoreDialect::kV1);
  CHECK(reqs[0].op == StoreOp::kSet);
  CHECK(reqs[0].keys[0] == "/k");
  CHECK(reqs[0].values[0] == "v");
  CHECK(reqs[1].op == StoreOp::kWait);
  CHECK(reqs[1].keys == std::vector<std::string>{"/k"});
  CHECK(reqs[2].op == StoreOp::kGet);
  CHECK(reqs[3].op == StoreOp::kAdd);
  CHECK(reqs[3].number == 5);
  CHECK(reqs[4].op == StoreOp::kCompareSet);
  CHECK(reqs[4].values == std::vector<std::string>{"v", "w"});
  CHECK(reqs[5].op == StoreOp::kCheck);
  CHECK(reqs[5].keys.size() == 2);
  CHECK(reqs[6].op == StoreOp::kNumKeys);
  CHECK(reqs[7].op == StoreOp::kDeleteKey);
  CHECK(p.buffered() == 0);
}

TEST_CASE("torch 2.x: VALIDATE picks the dialect, then its own numbering") {
  StoreParser p;
  auto reqs = ParseAll(p, Validate() + U8(1) + Str("k") + Str("v") +   // set
                              U8(9) + Str("k") + Str("w") +            // append
                              U8(10) + Le<uint64_t>(2) + Str("a") + Str("b") +  // multi_get
                              U8(11) + Le<int64_t>(1) + Str("a") + Str("1") +   // multi_set
                              U8(12) + U8(13) + Le<uint32_t>(77) +     // cancel_wait, ping
                              U8(8) + Str("k") + U8(7));               // delete_key, num_keys
  REQUIRE(reqs.size() == 9);
  CHECK(p.dialect() == StoreDialect::kV2);
  CHECK(reqs[0].op == StoreOp::kValidate);
  CHECK(reqs[1].op == StoreOp::kSet);
  CHECK(reqs[2].op == StoreOp::kAppend);
  CHECK(reqs[3].op == StoreOp::kMultiGet);
  CHECK(reqs[3].keys == std::vector<std::string>{"a", "b"});
  CHECK(reqs[4].op == StoreOp::kMultiSet);
  CHECK(reqs[4].values == std::vector<std::string>{"1"});
  CHECK(reqs[5].op == StoreOp::kCancelWait);
  CHECK(reqs[6].op == StoreOp::kPing);
  CHECK(reqs[6].number == 77);
  CHECK(reqs[7].op == StoreOp::kDeleteKey);
  CHECK(reqs[8].op == StoreOp::kNumKeys);
}

TEST_CASE("a request split at every offset comes out once, whole") {
  const std::string wire = U8(1) + Str("key") + Str("old") + Str("new") + U8(6);
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    StoreParser p;
    p.Feed(wire.data(), cut);
    std::vector<StoreRequest> got;
    for (auto r = p.Next(); r.ok() && *r; r = p.Next()) got.push_back(**r);
    p.Feed(wire.data() + cut, wire.size() - cut);
    for (auto r = p.Next(); r.ok() && *r; r = p.Next()) got.push_back(**r);
    REQUIRE(got.size() == 2);
    CHECK(got[0].values[1] == "new");
    CHECK(got[1].op == StoreOp::kNumKeys);
  }
}

TEST_CASE("a VALIDATE byte alone waits for its magic") {
  StoreParser p;
  const std::string v = Validate();
  p.Feed(v.data(), 3);
  auto r = p.Next();
  REQUIRE(r.ok());
  CHECK(!*r);
  CHECK(p.dialect() == StoreDialect::kUnknown);
  p.Feed(v.data() + 3, v.size() - 3);
  r = p.Next();
  REQUIRE(r.ok());
  REQUIRE(*r);
  CHECK((*r)->op == StoreOp::kValidate);
}

TEST_CASE("malformed streams are refused, and stay refused") {
  CHECK(ParseError(U8(7) + Str("k")).message().find("unknown request type 7") != std::string::npos);  // 1.13 WATCH_KEY
  CHECK(ParseError(U8(200)).IsInvalidArgument());
  CHECK(ParseError(Validate() + U8(14)).IsInvalidArgument());  // 2.x queue push
  CHECK(ParseError(Validate() + Validate()).message().find("VALIDATE after") != std::string::npos);
  StoreParser p;
  const std::string bad = U8(99) + U8(6);
  p.Feed(bad.data(), bad.size());
  CHECK(!p.Next().ok());
  CHECK(!p.Next().ok());
}

TEST_CASE("sizes over the limits are refused before the bytes arrive") {
  StoreLimits small;
  small.max_key_bytes = 8;
  small.max_value_bytes = 16;
  small.max_keys = 3;
  CHECK(ParseError(U8(0) + Le<uint64_t>(9), small).message().find("a key of 9 bytes") != std::string::npos);
  CHECK(ParseError(U8(0) + Str("k") + Le<uint64_t>(17), small).message().find("a value of 17") != std::string::npos);
  CHECK(ParseError(U8(5) + Le<uint64_t>(4), small).message().find("4 keys") != std::string::npos);
  // The default limits refuse a length that would not fit in memory.
  CHECK(ParseError(U8(0) + Le<uint64_t>(~0ull)).IsInvalidArgument());
}

TEST_CASE("a MULTI_SET over its cap is refused at the length that crosses it") {
  StoreLimits small;
  small.max_multi_bytes = 64;
  const std::string start = Validate() + U8(11) + Le<uint64_t>(3) + Str("a") + Str(std::string(20, 'x'));
  // The first key and value take 45 bytes; the second value's 20 bytes would
  // take the request to 82: refused though they never arrived.
  const std::string crossing = start + Str("b") + Le<uint64_t>(20);
  CHECK(ParseError(crossing, small).message().find("MULTI_SET: a request over 64 bytes") != std::string::npos);
  // A SET of the same size is not a MULTI_SET: only the request limit applies.
  CHECK(ParseError(Validate() + U8(1) + Str("k") + Str(std::string(100, 'v')), small).ok());
  // The default cap is 64 MiB: a 65 MiB MULTI_SET value length is refused, a
  // SET of it is waited for.
  CHECK(ParseError(Validate() + U8(11) + Le<uint64_t>(2) + Str("a") + Str(std::string(10, 'x')) + Str("b") +
                   Le<uint64_t>(64ull << 20))
            .IsInvalidArgument());
  CHECK(ParseError(Validate() + U8(1) + Str("k") + Le<uint64_t>(60ull << 20)).ok());
}

TEST_CASE("reply encoders write torch's little-endian forms") {
  std::string out;
  AppendStoreBytes(out, "ab");
  AppendStoreInt64(out, -2);
  AppendStoreUint8(out, 1);
  AppendStoreUint32(out, 7);
  CHECK(out == Str("ab") + Le<int64_t>(-2) + U8(1) + Le<uint32_t>(7));
}

// DropAttemptPrefix on one WAIT of `keys`: the keys it leaves.
std::vector<std::string> DropAttempt(std::vector<std::string> keys) {
  StoreRequest req;
  req.op = StoreOp::kWait;
  req.keys = std::move(keys);
  DropAttemptPrefix(req);
  return req.keys;
}

TEST_CASE("the per-node attempt number is dropped from torch's worker keys") {
  CHECK(DropAttempt({"/worker/attempt_0/rank_0", "/worker/attempt_12/default_pg/0//cpu//0"}) ==
        std::vector<std::string>{"/worker/attempt/rank_0", "/worker/attempt/default_pg/0//cpu//0"});
}

TEST_CASE("keys that only look like a worker attempt key are kept as they are") {
  const std::vector<std::string> kept = {"/worker/attempt_/x", "/worker/attempt_3", "/worker/attempt_3x/y",
                                         "user/key", "/worker/attempt/z"};
  CHECK(DropAttempt(kept) == kept);
}

TEST_CASE("a worker key behind two leading slashes loses its attempt number, behind three not") {
  CHECK(DropAttempt({"//worker/attempt_1/default_pg/rank_0", "///worker/attempt_1/x"}) ==
        std::vector<std::string>{"//worker/attempt/default_pg/rank_0", "///worker/attempt_1/x"});
}

using testing::Req;

void CheckSame(const StoreRequest& a, const StoreRequest& b) {
  CHECK(a.op == b.op);
  CHECK(a.keys == b.keys);
  CHECK(a.values == b.values);
  CHECK(a.number == b.number);
}

TEST_CASE("the client's encoder writes what torch 1.13's client sends") {
  // Byte for byte the wire of the first test case above.
  std::string out;
  REQUIRE(AppendStoreRequest(out, StoreDialect::kV1, Req(StoreOp::kSet, {"/k"}, {"v"})).ok());
  REQUIRE(AppendStoreRequest(out, StoreDialect::kV1, Req(StoreOp::kWait, {"/k"})).ok());
  REQUIRE(AppendStoreRequest(out, StoreDialect::kV1, Req(StoreOp::kAdd, {"/n"}, {}, 5)).ok());
  REQUIRE(AppendStoreRequest(out, StoreDialect::kV1, Req(StoreOp::kCompareSet, {"/k"}, {"v", "w"})).ok());
  REQUIRE(AppendStoreRequest(out, StoreDialect::kV1, Req(StoreOp::kDeleteKey, {"/k"})).ok());
  CHECK(out == U8(0) + Str("/k") + Str("v") + U8(5) + Le<uint64_t>(1) + Str("/k") + U8(3) + Str("/n") +
                   Le<int64_t>(5) + U8(1) + Str("/k") + Str("v") + Str("w") + U8(8) + Str("/k"));
}

TEST_CASE("every request the encoder writes, the parser reads back the same") {
  const std::vector<StoreRequest> v1 = {
      Req(StoreOp::kSet, {"k"}, {std::string(70000, 'x')}), Req(StoreOp::kCompareSet, {"k"}, {"", "b"}),
      Req(StoreOp::kGet, {"k"}), Req(StoreOp::kAdd, {"n"}, {}, -3), Req(StoreOp::kCheck, {"a", "b"}),
      Req(StoreOp::kWait, {"a"}), Req(StoreOp::kNumKeys), Req(StoreOp::kDeleteKey, {"k"})};
  const std::vector<StoreRequest> v2 = {
      Req(StoreOp::kValidate), Req(StoreOp::kSet, {"k"}, {"v"}), Req(StoreOp::kAppend, {"k"}, {"w"}),
      Req(StoreOp::kMultiGet, {"a", "b"}), Req(StoreOp::kMultiSet, {"a", "b"}, {"1", "2"}),
      Req(StoreOp::kCancelWait), Req(StoreOp::kPing, {}, {}, 77), Req(StoreOp::kAdd, {"n"}, {}, 1)};
  for (auto [dialect, reqs] : {std::pair{StoreDialect::kV1, v1}, std::pair{StoreDialect::kV2, v2}}) {
    std::string wire;
    for (const StoreRequest& r : reqs) REQUIRE(AppendStoreRequest(wire, dialect, r).ok());
    StoreParser p;
    auto got = ParseAll(p, wire);
    CHECK(p.dialect() == dialect);
    REQUIRE(got.size() == reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) CheckSame(got[i], reqs[i]);
  }
}

TEST_CASE("the encoder refuses a request the dialect does not have") {
  std::string out = "keep";
  for (StoreOp op : {StoreOp::kValidate, StoreOp::kAppend, StoreOp::kMultiGet, StoreOp::kMultiSet,
                     StoreOp::kCancelWait, StoreOp::kPing}) {
    CHECK(AppendStoreRequest(out, StoreDialect::kV1, Req(op, {"k"}, {"v"})).IsInvalidArgument());
  }
  CHECK(AppendStoreRequest(out, StoreDialect::kUnknown, Req(StoreOp::kGet, {"k"})).IsInvalidArgument());
  CHECK(out == "keep");
}

TEST_CASE("replies decode as the server encodes them, and wait for all their bytes") {
  std::string wire;
  AppendStoreBytes(wire, "value");      // GET
  AppendStoreInt64(wire, 42);           // ADD
  AppendStoreUint8(wire, 0);            // WAIT
  AppendStoreBytes(wire, "a");          // MULTI_GET a b
  AppendStoreBytes(wire, "");
  AppendStoreUint32(wire, 9);           // PING
  const std::vector<StoreRequest> reqs = {Req(StoreOp::kGet, {"k"}), Req(StoreOp::kSet, {"k"}, {"v"}),
                                          Req(StoreOp::kAdd, {"n"}, {}, 1), Req(StoreOp::kWait, {"k"}),
                                          Req(StoreOp::kMultiGet, {"a", "b"}), Req(StoreOp::kPing, {}, {}, 9)};
  std::string_view rest = wire;
  std::vector<StoreReply> got;
  for (const StoreRequest& req : reqs) {
    StoreReply reply;
    // Every cut short of the whole reply asks for more.
    for (size_t cut = 0; cut < rest.size(); ++cut) {
      auto r = ParseStoreReply(rest.substr(0, cut), req, reply);
      REQUIRE(r.ok());
      if (*r) {
        CHECK(**r <= cut);
        break;
      }
    }
    auto r = ParseStoreReply(rest, req, reply);
    REQUIRE(r.ok());
    REQUIRE(*r);
    CHECK(StoreOpHasReply(req.op) == (**r > 0));
    rest.remove_prefix(**r);
    got.push_back(reply);
  }
  CHECK(rest.empty());
  CHECK(got[0].values == std::vector<std::string_view>{"value"});
  CHECK(got[1].values.empty());
  CHECK(got[2].number == 42);
  CHECK(got[3].number == 0);
  CHECK(got[4].values == std::vector<std::string_view>{"a", ""});
  CHECK(got[5].number == 9);
  StoreLimits small;
  small.max_value_bytes = 4;
  StoreReply reply;
  CHECK(!ParseStoreReply(Str("toolong"), Req(StoreOp::kGet, {"k"}), reply, small).ok());
}

TEST_CASE("bytes received into Space and committed parse as fed ones") {
  std::string wire;
  REQUIRE(AppendStoreRequest(wire, StoreDialect::kV1, Req(StoreOp::kSet, {"k"}, {std::string(300000, 'v')})).ok());
  REQUIRE(AppendStoreRequest(wire, StoreDialect::kV1, Req(StoreOp::kGet, {"k"})).ok());
  StoreParser p;
  std::vector<StoreRequest> got;
  size_t at = 0;
  while (at < wire.size()) {  // as a socket delivers: up to 4 KB per read
    char* room = p.Space(4096);
    const size_t n = std::min<size_t>(std::min<size_t>(p.space(), 4096), wire.size() - at);
    std::memcpy(room, wire.data() + at, n);
    p.Commit(n);
    at += n;
    StoreRequest req;
    for (auto r = p.Next(req); r.ok() && *r; r = p.Next(req)) got.push_back(req);
    // A copy of the parser, mid-request, goes on the same.
    StoreParser copy = p;
    CHECK(copy.buffered() == p.buffered());
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0].values[0].size() == 300000);
  CHECK(got[1].op == StoreOp::kGet);
  CHECK(p.buffered() == 0);
}

}  // namespace
}  // namespace ctrun::rdzv
