// The wire protocol of PyTorch's c10d TCPStore, as its clients speak it:
// bytes in -> requests out, replies -> bytes. Pure: no sockets, no clock.
//
// Two dialects share one framing (a request is a type byte followed by its
// arguments; integers are little-endian, strings and byte vectors are a
// uint64 length then the bytes):
//
//   kV1 (torch 1.13): SET=0 COMPARE_SET=1 GET=2 ADD=3 CHECK=4 WAIT=5
//                     GETNUMKEYS=6 WATCH_KEY=7 DELETE_KEY=8
//   kV2 (torch 2.x):  VALIDATE=0 SET=1 COMPARE_SET=2 GET=3 ADD=4 CHECK=5
//                     WAIT=6 GETNUMKEYS=7 DELETE_KEY=8 APPEND=9 MULTI_GET=10
//                     MULTI_SET=11 CANCEL_WAIT=12 PING=13
//
// A 2.x client opens every connection with VALIDATE (type 0, then the uint32
// magic 0x3C85F7CE); a 1.13 client's first request never carries the magic
// where a key length would be (it would be a key of ~1 GB, over the limit).
// So the first request of a connection decides its dialect.
//
// Not served (refused as malformed): 1.13's WATCH_KEY (only its C++ watchKey
// API sends it; neither its python TCPStore nor its process groups do) and
// 2.x's queue requests (QUEUE_PUSH and later).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ctrun::rdzv {

enum class StoreOp {
  kValidate,    // 2.x handshake; no reply
  kSet,         // keys[0] = values[0]; no reply
  kCompareSet,  // keys[0], values = {expected, desired}; reply: bytes
  kGet,         // keys[0]; reply: bytes
  kAdd,         // keys[0] += number; reply: int64
  kCheck,       // keys; reply: uint8 0 ready / 1 not ready
  kWait,        // keys; reply: uint8 0 once every key exists
  kNumKeys,     // reply: int64
  kDeleteKey,   // keys[0]; reply: int64 (number deleted)
  kAppend,      // keys[0] += values[0]; no reply
  kMultiGet,    // keys; reply: one bytes per key
  kMultiSet,    // keys[i] = values[i]; no reply
  kCancelWait,  // drop this client's waits; reply: uint8 1 (wait canceled)
  kPing,        // number (uint32 nonce); reply: the same uint32
};

// One request, decoded. Strings hold raw bytes.
struct StoreRequest {
  StoreOp op = StoreOp::kNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  int64_t number = 0;  // kAdd: the delta; kPing: the nonce
};

enum class StoreDialect { kUnknown, kV1, kV2 };

// What a single request may carry; anything bigger is refused before it is
// buffered.
struct StoreLimits {
  uint64_t max_key_bytes = 1 << 20;     // 1 MiB
  uint64_t max_value_bytes = 64 << 20;  // 64 MiB
  uint64_t max_keys = 1 << 16;          // keys in one CHECK/WAIT/MULTI_*
  uint64_t max_request_bytes = 128 << 20;
  // A MULTI_SET's keys and values together (a MULTI_GET's reply has the same
  // cap: kMaxStoreMultiReplyBytes, store_state.h).
  uint64_t max_multi_bytes = 64 << 20;  // 64 MiB
};

inline constexpr uint32_t kStoreValidateMagic = 0x3C85F7CE;

// Incremental decoder of one connection's byte stream.
// Copyable; not thread-safe.
class StoreParser {
 public:
  explicit StoreParser(StoreLimits limits = {}) : limits_(limits) {}
  StoreParser(const StoreParser& other);
  StoreParser& operator=(const StoreParser& other);
  StoreParser(StoreParser&&) = default;
  StoreParser& operator=(StoreParser&&) = default;

  // Appends bytes received from the client.
  void Feed(const void* data, size_t size);

  // Receiving without Feed's copy: Space(want) is room for at least `want`
  // bytes after those fed so far (a socket reads into it), and Commit(n)
  // then takes its first n bytes as fed. The room is valid until the next
  // call of any other member.
  char* Space(size_t want);
  size_t space() const { return capacity_ - end_; }
  void Commit(size_t n) { end_ += n; }

  // The next complete request, or nullopt when more bytes are needed.
  // InvalidArgument (naming the offending type or size) when the stream is
  // malformed: an unknown type, a size over the limits, VALIDATE with a bad
  // magic, a request the dialect does not have. After an error the parser
  // stays failed: every later call returns the same Status.
  Result<std::optional<StoreRequest>> Next();
  // The same into `req`, reusing the memory of its keys and values (a
  // server decodes every request of a connection into one): true when a
  // request was decoded, false when more bytes are needed.
  Result<bool> Next(StoreRequest& req);

  StoreDialect dialect() const { return dialect_; }
  // Bytes fed but not yet consumed by a complete request.
  size_t buffered() const { return end_ - consumed_; }

 private:
  StoreLimits limits_;
  StoreDialect dialect_ = StoreDialect::kUnknown;
  // [consumed_, end_) fed and not consumed, then room up to capacity_.
  // Not initialised: a connection's first 4 KB of room costs no page until
  // bytes arrive. A room over kKeepBytes is given back once all of it is
  // consumed, so that an idle connection does not sit on a big value's room
  // and the next big read gets memory malloc recently freed (warm in cache).
  static constexpr size_t kKeepBytes = 256 << 10;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t consumed_ = 0;
  size_t end_ = 0;
  Status failed_;
};

// torch < 2.5 workers reach the agent's store through
// PrefixStore("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"), and that count
// is kept per node: after one node's charged restart, the workers of one
// round would use different prefixes and never meet (pytorch#135712). The
// agent's store is emptied before every round, so the attempt separates
// nothing: drop it from every key of `req` ("/worker/attempt_3/x" becomes
// "/worker/attempt/x", and "//worker/attempt_3/x", as TCPStore sends it
// behind its own "/", becomes "//worker/attempt/x"), as torch 2.5 does by
// not prefixing. Other keys are left as they are.
void DropAttemptPrefix(StoreRequest& req);

// The client's side, for load generators and tests that speak to a store
// server (ctrun's or torch's) the way TCPStore's clients do.
//
// Appends `req` in `dialect`'s wire form (the type byte, then its arguments
// as the parser above reads them) to `out`. InvalidArgument, appending
// nothing, when the dialect has no such request (kV1 has no VALIDATE,
// APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT or PING) or the dialect is
// kUnknown.
Status AppendStoreRequest(std::string& out, StoreDialect dialect, const StoreRequest& req);

// A server's reply to one request, decoded. The views point into the bytes
// given to ParseStoreReply.
struct StoreReply {
  std::vector<std::string_view> values;  // GET, COMPARE_SET: one; MULTI_GET: one per key
  int64_t number = 0;  // ADD, GETNUMKEYS, DELETE_KEY: the int64; CHECK, WAIT,
                       // CANCEL_WAIT: the uint8; PING: the uint32
};

// Whether the server answers `op` (SET, MULTI_SET, APPEND and VALIDATE have
// no reply).
bool StoreOpHasReply(StoreOp op);

// Decodes the reply to `req` at the start of `bytes`: the number of bytes it
// takes (0 for a request without a reply), or nullopt when not all of it is
// there yet. InvalidArgument when a length in it is over `limits`.
Result<std::optional<size_t>> ParseStoreReply(std::string_view bytes, const StoreRequest& req,
                                              StoreReply& out, const StoreLimits& limits = {});

// Reply encoders: append the wire form to `out`.
void AppendStoreBytes(std::string& out, std::string_view bytes);  // uint64 length + bytes
void AppendStoreInt64(std::string& out, int64_t v);
void AppendStoreUint8(std::string& out, uint8_t v);
void AppendStoreUint32(std::string& out, uint32_t v);

// Printable name of a request type ("SET"), for logs.
std::string_view StoreOpName(StoreOp op);

}  // namespace ctrun::rdzv
