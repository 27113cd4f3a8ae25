#include "rendezvous/store/store_state.h"

#include <algorithm>
#include <charconv>

namespace ctrun::rdzv {

namespace {

bool ParseInt64(const std::string& s, int64_t& v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end && !s.empty();
}

}  // namespace

void StoreState::Write(const std::string& key, std::string&& value,
                       std::vector<StoreClientId>& woken) {
  largest_value_ = std::max(largest_value_, value.size());
  if (auto it = table_.find(key); it != table_.end()) {
    // The old value's memory goes back in `value`: a server that decodes
    // every request of a connection into one StoreRequest reuses it for the
    // next value instead of a free and a malloc per write (which for big
    // values makes malloc hand pages back to the kernel and fault them in
    // again).
    it->second.swap(value);
  } else {
    table_.emplace(key, std::move(value));
  }
  auto it = key_waits_.find(key);
  if (it == key_waits_.end()) return;
  for (uint64_t id : it->second) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;  // canceled, or its client left
    if (--w->second.missing == 0) {
      const StoreClientId client = w->second.client;
      woken.push_back(client);
      waits_.erase(w);
      if (auto c = client_waits_.find(client); c != client_waits_.end()) {
        std::erase(c->second, id);
        if (c->second.empty()) client_waits_.erase(c);
      }
    }
  }
  key_waits_.erase(it);
}

Status StoreState::Apply(StoreClientId client, const StoreRequest& req, std::string& reply,
                         std::vector<StoreClientId>& woken) {
  StoreRequest copy = req;
  return Apply(client, std::move(copy), reply, woken);
}

Status StoreState::Apply(StoreClientId client, StoreRequest&& req, std::string& reply,
                         std::vector<StoreClientId>& woken) {
  switch (req.op) {
    case StoreOp::kValidate:
      return Status::Ok();
    case StoreOp::kSet:
      Write(req.keys[0], std::move(req.values[0]), woken);
      return Status::Ok();
    case StoreOp::kMultiSet:
      for (size_t i = 0; i < req.keys.size(); ++i) Write(req.keys[i], std::move(req.values[i]), woken);
      return Status::Ok();
    case StoreOp::kAppend: {
      auto it = table_.find(req.keys[0]);
      Write(req.keys[0], it == table_.end() ? req.values[0] : it->second + req.values[0], woken);
      return Status::Ok();
    }
    case StoreOp::kCompareSet:
      CompareSet(req, reply, woken);
      return Status::Ok();
    case StoreOp::kGet: {
      auto it = table_.find(req.keys[0]);
      if (it == table_.end()) return Status::NotFound("GET of a missing key");
      AppendStoreBytes(reply, it->second);
      return Status::Ok();
    }
    case StoreOp::kMultiGet: {
      // The reply's size first: one too big is refused before it is built.
      uint64_t bytes = 0;
      for (const std::string& k : req.keys) {
        auto it = table_.find(k);
        if (it == table_.end()) return Status::NotFound("MULTI_GET of a missing key");
        bytes += sizeof(uint64_t) + it->second.size();
      }
      if (bytes > kMaxStoreMultiReplyBytes) {
        return Status::ResourceExhausted("a MULTI_GET of " + std::to_string(req.keys.size()) +
                                         " keys whose reply would be " + std::to_string(bytes) +
                                         " bytes (the limit is " + std::to_string(kMaxStoreMultiReplyBytes) +
                                         ")");
      }
      reply.reserve(reply.size() + bytes);
      for (const std::string& k : req.keys) AppendStoreBytes(reply, table_.find(k)->second);
      return Status::Ok();
    }
    case StoreOp::kAdd:
      return Add(req, reply, woken);
    case StoreOp::kCheck: {
      bool ready = true;
      for (const std::string& k : req.keys) ready = ready && table_.count(k) > 0;
      AppendStoreUint8(reply, ready ? kStoreCheckReady : kStoreCheckNotReady);
      return Status::Ok();
    }
    case StoreOp::kWait:
      Wait(client, req, reply);
      return Status::Ok();
    case StoreOp::kNumKeys:
      AppendStoreInt64(reply, static_cast<int64_t>(table_.size()));
      return Status::Ok();
    case StoreOp::kDeleteKey:
      AppendStoreInt64(reply, static_cast<int64_t>(table_.erase(req.keys[0])));
      return Status::Ok();
    case StoreOp::kCancelWait:
      Disconnect(client);
      AppendStoreUint8(reply, kStoreWaitCanceled);
      return Status::Ok();
    case StoreOp::kPing:
      AppendStoreUint32(reply, static_cast<uint32_t>(req.number));
      return Status::Ok();
  }
  return Status::Internal("unhandled store request");
}

void StoreState::CompareSet(StoreRequest& req, std::string& reply,
                            std::vector<StoreClientId>& woken) {
  const std::string& expected = req.values[0];
  std::string& desired = req.values[1];
  auto it = table_.find(req.keys[0]);
  if (it == table_.end()) {
    if (!expected.empty()) {
      AppendStoreBytes(reply, expected);
      return;
    }
  } else if (it->second != expected) {
    AppendStoreBytes(reply, it->second);
    return;
  }
  AppendStoreBytes(reply, desired);
  Write(req.keys[0], std::move(desired), woken);
}

Status StoreState::Add(const StoreRequest& req, std::string& reply,
                       std::vector<StoreClientId>& woken) {
  int64_t value = 0;
  auto it = table_.find(req.keys[0]);
  if (it != table_.end() && !ParseInt64(it->second, value)) {
    return Status::InvalidArgument("ADD to a key that does not hold a number");
  }
  if (__builtin_add_overflow(value, req.number, &value)) {
    return Status::InvalidArgument("ADD overflows int64");
  }
  Write(req.keys[0], std::to_string(value), woken);
  AppendStoreInt64(reply, value);
  return Status::Ok();
}

void StoreState::Wait(StoreClientId client, const StoreRequest& req, std::string& reply) {
  size_t missing = 0;
  for (const std::string& k : req.keys) missing += table_.count(k) == 0;
  if (missing == 0) {
    AppendStoreUint8(reply, kStoreStopWaiting);
    return;
  }
  const uint64_t id = next_wait_++;
  PendingWait wait{client, missing, {}};
  wait.keys.reserve(missing);
  for (const std::string& k : req.keys) {
    if (table_.count(k) == 0) {
      key_waits_[k].push_back(id);
      wait.keys.push_back(k);
    }
  }
  waits_.emplace(id, std::move(wait));
  client_waits_[client].push_back(id);
}

void StoreState::Unregister(uint64_t id, const std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    auto it = key_waits_.find(k);
    if (it == key_waits_.end()) continue;  // written since: its entry went then
    std::erase(it->second, id);
    if (it->second.empty()) key_waits_.erase(it);
  }
}

void StoreState::Disconnect(StoreClientId client) {
  auto c = client_waits_.find(client);
  if (c == client_waits_.end()) return;
  for (uint64_t id : c->second) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;
    Unregister(id, w->second.keys);
    waits_.erase(w);
  }
  client_waits_.erase(c);
}

void StoreState::Clear() {
  table_.clear();
  waits_.clear();
  key_waits_.clear();
  client_waits_.clear();
  largest_value_ = 0;
}

}  // namespace ctrun::rdzv
