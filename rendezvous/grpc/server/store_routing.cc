#include "rendezvous/grpc/server/store_routing.h"

namespace ctrun::rdzv {

StoreGrant StoreRouting::Grant(const std::string& run_id, const std::set<std::string>& ips) {
  Release(run_id);
  StoreGrant grant;
  for (const std::string& ip : ips) {
    auto it = owner_.find(ip);
    if (it != owner_.end()) {
      grant.conflict_ip = ip;
      grant.holder = it->second;
      return grant;
    }
  }
  for (const std::string& ip : ips) owner_[ip] = run_id;
  held_[run_id] = ips;
  grant.granted = true;
  return grant;
}

void StoreRouting::Release(const std::string& run_id) {
  auto it = held_.find(run_id);
  if (it == held_.end()) return;
  for (const std::string& ip : it->second) owner_.erase(ip);
  held_.erase(it);
}

std::optional<std::string> StoreRouting::Route(const std::string& ip) const {
  auto it = owner_.find(ip);
  if (it == owner_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ctrun::rdzv
