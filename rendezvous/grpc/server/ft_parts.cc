#include "rendezvous/grpc/server/ft_parts.h"

#include <algorithm>

namespace ctrun::rdzv {
namespace {

std::string Nodes(int64_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

}  // namespace

Status FtParts::Check(const SyncCall& call, int64_t part, int64_t parts) const {
  const std::string who = "replica group '" + call.group + "'";
  if (parts < 1 || parts > kMaxFtParts) {
    return Status::InvalidArgument(who + ": parts " + std::to_string(parts) +
                                   " is out of range: a replica group has 1 to 64 nodes");
  }
  if (part < 0 || part >= parts) {
    return Status::InvalidArgument(who + ": part " + std::to_string(part) + " is out of range: give 0 to " +
                                   std::to_string(parts - 1) + " for a group of " + Nodes(parts));
  }
  if (std::optional<int64_t> known = parts_of(call.group); known && *known != parts) {
    return Status::FailedPrecondition(who + " has " + Nodes(*known) + " (parts " + std::to_string(*known) +
                                      "); this node gave parts " + std::to_string(parts) +
                                      ": give every node of a group the same group size");
  }
  size_t bytes = call.address.size();
  if (auto it = held_.find(call.group); it != held_.end()) {
    for (const auto& [p, held] : it->second) {
      if (p != part) bytes += 1 + held.call.address.size();
    }
  }
  if (bytes > kMaxFtAssembledAddressBytes) {
    return Status::InvalidArgument(who + ", part " + std::to_string(part) + ": healing address of " +
                                   std::to_string(call.address.size()) +
                                   " bytes makes the group's joined address " + std::to_string(bytes) +
                                   " bytes: the parts' addresses together must be at most 2048 bytes");
  }
  return Status::Ok();
}

std::optional<uint64_t> FtParts::Hold(const SyncCall& call, int64_t part, int64_t parts, uint64_t call_id) {
  counts_[call.group] = parts;
  std::map<int64_t, Held>& group = held_[call.group];
  std::optional<uint64_t> replaced;
  if (auto it = group.find(part); it != group.end()) replaced = it->second.call_id;
  if (!replaced) ++size_;
  group[part] = Held{call_id, call};
  return replaced;
}

std::optional<Result<SyncCall>> FtParts::Assemble(const std::string& group) const {
  auto it = held_.find(group);
  std::optional<int64_t> parts = parts_of(group);
  if (it == held_.end() || !parts || static_cast<int64_t>(it->second.size()) != *parts) return std::nullopt;
  const std::map<int64_t, Held>& held = it->second;
  const SyncCall& first = held.begin()->second.call;
  SyncCall out{.group = group, .committed_step = first.committed_step, .address = "", .ballot = std::nullopt};
  std::string steps;
  bool differ = false;
  bool all_ok = true;
  bool late = false;  // a part came late to the step's collective
  for (const auto& [part, h] : held) {
    const SyncCall& c = h.call;
    differ = differ || c.committed_step != first.committed_step;
    steps += (steps.empty() ? "" : ", ") + ("part " + std::to_string(part) + ": " + std::to_string(c.committed_step));
    if (part != held.begin()->first) out.address += kFtAddressJoin;
    out.address += c.address;
    if (c.ballot && !out.ballot) out.ballot = Ballot{.quorum_id = c.ballot->quorum_id, .step = c.ballot->step};
  }
  if (differ) {
    return Result<SyncCall>(Status::InvalidArgument(
        "replica group '" + group + "': its nodes gave different committed steps (" + steps +
        "): every node of a group must call for the same step"));
  }
  if (out.ballot) {
    for (const auto& [part, h] : held) {
      const std::optional<Ballot>& b = h.call.ballot;
      all_ok = all_ok && b && b->quorum_id == out.ballot->quorum_id && b->step == out.ballot->step && b->ok;
      late = late || (b && b->late);
      if (b) out.ballot->world = std::max(out.ballot->world, b->world);
    }
    out.ballot->ok = all_ok;
    out.ballot->late = !all_ok && late;
  }
  return Result<SyncCall>(std::move(out));
}

std::vector<uint64_t> FtParts::Take(const std::string& group) {
  std::vector<uint64_t> ids;
  auto it = held_.find(group);
  if (it == held_.end()) return ids;
  for (const auto& [part, held] : it->second) ids.push_back(held.call_id);
  size_ -= ids.size();
  held_.erase(it);
  return ids;
}

void FtParts::Drop(const std::string& group, uint64_t call_id) {
  auto it = held_.find(group);
  if (it == held_.end()) return;
  for (auto part = it->second.begin(); part != it->second.end(); ++part) {
    if (part->second.call_id != call_id) continue;
    it->second.erase(part);
    --size_;
    break;
  }
  if (it->second.empty()) held_.erase(it);
}

std::optional<int64_t> FtParts::parts_of(const std::string& group) const {
  auto it = counts_.find(group);
  if (it == counts_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> FtParts::Partial() const {
  std::vector<std::string> out;
  for (const auto& [group, parts] : held_) {
    std::optional<int64_t> count = parts_of(group);
    if (count && static_cast<int64_t>(parts.size()) < *count) out.push_back(group);
  }
  return out;
}

void FtParts::ForEachCall(const std::function<void(uint64_t)>& fn) const {
  for (const auto& [group, parts] : held_) {
    for (const auto& [part, held] : parts) fn(held.call_id);
  }
}

}  // namespace ctrun::rdzv
