// EtcdKv: the few etcd v3 calls the etcd-v3 rendezvous needs, over etcd's
// own gRPC API (generated from the .proto files Debian ships). Proto types
// stop here.
//
// Endpoints: the ones given, plus every client URL the cluster reports
// (MemberList) at Connect, so losing the member the user named does not
// matter. A call that fails with UNAVAILABLE or DEADLINE_EXCEEDED (a dead or
// leaderless member) is retried on the next endpoint, each endpoint at most
// twice; each try is bounded by `call_timeout`. Requests carry etcd's
// "hasleader" metadata, so a member cut off from the quorum fails them at
// once instead of hanging. gRPC keep-alive pings (every 10 s, 5 s to
// answer) break a watch stream on a frozen member, which then moves on.
//
// Thread model: every method may be called from any thread, concurrently.
// Watch callbacks run on the watch's own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ctrun::rdzv {

struct EtcdValue {
  std::string value;
  int64_t mod_revision = 0;
};

class EtcdKv {
 public:
  // Connects to `endpoints` ("host:port"; at least one). Unavailable naming
  // the endpoints when none answers within `call_timeout` each.
  static Result<std::unique_ptr<EtcdKv>> Connect(const std::vector<std::string>& endpoints, Duration call_timeout);
  ~EtcdKv();
  EtcdKv(const EtcdKv&) = delete;
  EtcdKv& operator=(const EtcdKv&) = delete;

  // The key's value, nullopt when absent.
  Result<std::optional<EtcdValue>> Get(const std::string& key);
  // Keys under `prefix` (values not fetched).
  Result<std::vector<std::string>> Keys(const std::string& prefix);
  // Writes `value` if the key's mod_revision is still `expected` (0: the key
  // must be absent). True when written, false when another writer came first.
  Result<bool> CompareAndSwap(const std::string& key, const std::string& value, int64_t expected);
  // A lease of `ttl` (rounded up to whole seconds, at least 2); its id.
  Result<int64_t> GrantLease(Duration ttl);
  // Puts `key` = `value` bound to `lease`.
  Status PutWithLease(const std::string& key, const std::string& value, int64_t lease);
  // One keep-alive of `lease`; NotFound when it expired.
  Status KeepAlive(int64_t lease);
  Status Revoke(int64_t lease);

  // Watches every key under `prefix` from now on, on a thread of its own,
  // through member failures (resuming at the next revision). `on_event(key,
  // deleted)` runs for each change; `on_event("", false)` after each
  // (re)connect, when changes may have been missed. Stops in the destructor.
  // Call at most once.
  void Watch(const std::string& prefix, std::function<void(const std::string& key, bool deleted)> on_event);

  // The endpoints in use (given + discovered).
  std::vector<std::string> endpoints() const;

 private:
  class Impl;
  explicit EtcdKv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrun::rdzv
