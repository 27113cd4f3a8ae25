// NodeStreams: the open Join stream of each node of each run (join_stream.h),
// through which the server pushes the node's updates, and the WhenDrained
// callbacks waiting for a run to hold no live node.
//
// A node has at most one current stream: installing a new one ends the one
// it replaces (queued in the Outbox); a stream that ends is dropped only if
// it is still its node's current one.
//
// Locking: none of its own; the server's mutex guards it. gRPC work is
// queued in an Outbox, done after the lock is released.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/grpc/server/join_stream.h"
#include "rendezvous/machine/machine.h"

namespace ctrun::rdzv {

class NodeStreams {
 public:
  // The current stream of `node` in `run_id`, or null.
  JoinStream* Find(const std::string& run_id, const NodeId& node) const;
  // Makes `stream` its node's stream, ending the one it replaces.
  void Install(JoinStream* stream, Outbox& out);
  // `stream` ended: dropped when it is its node's current stream (true).
  bool Remove(JoinStream* stream);
  // Ends every stream of `run_id` and forgets them, and queues the run's
  // WhenDrained callbacks (the run is forgotten).
  void ForgetRun(const std::string& run_id, Outbox& out);
  // Ends every stream (Shutdown); they are dropped as they end (Remove).
  void EndAll(Outbox& out);

  // WhenDrained: `cb` waits for `run_id` to hold no live node.
  void AddDrainedWaiter(const std::string& run_id, std::function<void()> cb);
  // `run_id` holds no live node: queues its WhenDrained callbacks.
  void TakeDrainedWaiters(const std::string& run_id, Outbox& out);

 private:
  std::map<std::string, std::map<NodeId, JoinStream*, NodeIdLess>> streams_;  // by run, then node
  std::map<std::string, std::vector<std::function<void()>>> drained_waiters_;  // by run
};

}  // namespace ctrun::rdzv
