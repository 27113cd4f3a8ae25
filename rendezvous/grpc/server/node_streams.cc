#include "rendezvous/grpc/server/node_streams.h"

#include <utility>

namespace ctrun::rdzv {

JoinStream* NodeStreams::Find(const std::string& run_id, const NodeId& node) const {
  auto run = streams_.find(run_id);
  if (run == streams_.end()) return nullptr;
  auto it = run->second.find(node);
  return it == run->second.end() ? nullptr : it->second;
}

void NodeStreams::Install(JoinStream* stream, Outbox& out) {
  JoinStream*& slot = streams_[stream->run_id()][stream->node()];
  if (slot && slot != stream && slot->RequestFinish(grpc::Status::OK)) out.kicks.push_back(slot);
  slot = stream;
}

bool NodeStreams::Remove(JoinStream* stream) {
  auto run = streams_.find(stream->run_id());
  if (run == streams_.end()) return false;
  auto it = run->second.find(stream->node());
  if (it == run->second.end() || it->second != stream) return false;
  run->second.erase(it);
  if (run->second.empty()) streams_.erase(run);
  return true;
}

void NodeStreams::ForgetRun(const std::string& run_id, Outbox& out) {
  if (auto run = streams_.find(run_id); run != streams_.end()) {
    for (auto& [node, stream] : run->second) {
      if (stream->RequestFinish(grpc::Status::OK)) out.kicks.push_back(stream);
    }
    streams_.erase(run);
  }
  TakeDrainedWaiters(run_id, out);
}

void NodeStreams::EndAll(Outbox& out) {
  for (auto& [run, nodes] : streams_) {
    for (auto& [node, stream] : nodes) {
      if (stream->RequestFinish(grpc::Status::OK)) out.kicks.push_back(stream);
    }
  }
}

void NodeStreams::AddDrainedWaiter(const std::string& run_id, std::function<void()> cb) {
  drained_waiters_[run_id].push_back(std::move(cb));
}

void NodeStreams::TakeDrainedWaiters(const std::string& run_id, Outbox& out) {
  auto waiting = drained_waiters_.find(run_id);
  if (waiting == drained_waiters_.end()) return;
  for (auto& cb : waiting->second) out.calls.push_back(std::move(cb));
  drained_waiters_.erase(waiting);
}

}  // namespace ctrun::rdzv
