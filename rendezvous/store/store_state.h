// StoreState: the key-value table behind the agent-hosted store, and the
// clients waiting on its keys. Pure: requests in, reply bytes out; no
// sockets, clock or threads (rendezvous/store/store_server.h owns those).
//
// Semantics follow torch's own TCPStore server:
//  - SET, MULTI_SET, APPEND, ADD and a COMPARE_SET that writes wake the
//    clients waiting on those keys;
//  - COMPARE_SET writes `desired` when the key holds `expected`, or when the
//    key is missing and `expected` is empty; it replies with the value the key
//    holds afterwards, or with `expected` when the key is missing;
//  - ADD keeps a decimal number as the key's value (a missing key counts 0);
//  - a WAIT on keys that all exist is answered at once, otherwise when the
//    last of them is written; the client's connection closing drops it;
//  - GET and MULTI_GET of a missing key are errors: clients WAIT first.
//
// Bounds: a MULTI_GET whose reply would exceed kMaxStoreMultiReplyBytes is
// refused before any of it is built; a client's waits, and the entries they
// hold per key, are forgotten when it leaves (Disconnect) or sends
// CANCEL_WAIT, so abandoned WAITs cost nothing after their client is gone.
//
// Copyable; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "rendezvous/store/store_protocol.h"

namespace ctrun::rdzv {

using StoreClientId = uint64_t;

class StoreState {
 public:
  // Applies `req` from `client`. Appends the reply bytes for `client` (if the
  // request has a reply now) to `reply`, and each client that a write
  // released from its WAIT, once per released WAIT, to `woken` (its reply is
  // the single byte kStoreStopWaiting). Errors, leaving the table unchanged:
  // NotFound for GET/MULTI_GET of a missing key, InvalidArgument for ADD to a
  // key that does not hold a decimal int64 (or whose sum overflows),
  // ResourceExhausted for a MULTI_GET whose reply would be over
  // kMaxStoreMultiReplyBytes (nothing is appended to `reply` then).
  // The values `req` writes are moved out of it (a server's request, done
  // with); the const& overload copies them.
  Status Apply(StoreClientId client, StoreRequest&& req, std::string& reply,
               std::vector<StoreClientId>& woken);
  Status Apply(StoreClientId client, const StoreRequest& req, std::string& reply,
               std::vector<StoreClientId>& woken);

  // Forgets `client`'s waits and their per-key entries (its connection
  // closed). Costs the number of the client's waits and of their keys.
  void Disconnect(StoreClientId client);

  // Drops every key and every wait (a new round starts from an empty store).
  void Clear();

  // The value of `key`, or null; valid until the next Apply, Disconnect or
  // Clear.
  const std::string* Find(const std::string& key) const {
    auto it = table_.find(key);
    return it == table_.end() ? nullptr : &it->second;
  }

  size_t num_keys() const { return table_.size(); }
  size_t num_waits() const { return waits_.size(); }
  // Keys that a pending WAIT is registered on (for tests: abandoned waits
  // must not leave any behind).
  size_t num_waited_keys() const { return key_waits_.size(); }
  // The size of the largest value written since the last Clear (values
  // overwritten or deleted since included): the store server sizes its
  // per-client reply queue from it.
  size_t largest_value() const { return largest_value_; }

 private:
  struct PendingWait {
    StoreClientId client;
    size_t missing;                 // keys not written yet
    std::vector<std::string> keys;  // the keys it is registered on in key_waits_
  };
  // Removes wait `id` (its registered keys named in `keys`) from key_waits_.
  void Unregister(uint64_t id, const std::vector<std::string>& keys);
  void Write(const std::string& key, std::string&& value, std::vector<StoreClientId>& woken);
  // The requests with more than a line to them; same contract as Apply.
  void CompareSet(StoreRequest& req, std::string& reply, std::vector<StoreClientId>& woken);
  Status Add(const StoreRequest& req, std::string& reply, std::vector<StoreClientId>& woken);
  // Replies now if every key is there, else registers a PendingWait.
  void Wait(StoreClientId client, const StoreRequest& req, std::string& reply);

  std::unordered_map<std::string, std::string> table_;
  std::unordered_map<uint64_t, PendingWait> waits_;                           // by wait id
  std::unordered_map<std::string, std::vector<uint64_t>> key_waits_;   // key -> wait ids
  std::unordered_map<StoreClientId, std::vector<uint64_t>> client_waits_;  // client -> wait ids (some may be done)
  uint64_t next_wait_ = 1;
  size_t largest_value_ = 0;
};

// The largest MULTI_GET reply served: 64 MiB (a value's own limit,
// StoreLimits::max_value_bytes). A bigger one is refused, its connection
// closed; the same cap bounds a MULTI_SET request (StoreLimits::max_multi_bytes).
inline constexpr uint64_t kMaxStoreMultiReplyBytes = 64 << 20;

inline constexpr uint8_t kStoreStopWaiting = 0;
inline constexpr uint8_t kStoreWaitCanceled = 1;
inline constexpr uint8_t kStoreCheckReady = 0;
inline constexpr uint8_t kStoreCheckNotReady = 1;

}  // namespace ctrun::rdzv
