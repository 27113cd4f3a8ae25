// CheckPreempt (preempt.h) and RendezvousMachine::OnPreempt (machine.h).
#include "rendezvous/machine/preempt.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "rendezvous/machine/machine.h"

namespace ctrun::rdzv {

Status CheckPreempt(double remaining_s, std::string_view source) {
  if (source.size() > kMaxPreemptSource) {
    return Status::InvalidArgument("preemption notice: source is " + std::to_string(source.size()) +
                                   " bytes, more than " + std::to_string(kMaxPreemptSource) +
                                   ": send the signal's name (e.g. SIGTERM)");
  }
  for (char ch : source) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return Status::InvalidArgument(std::string("preemption notice: source holds byte ") + hex +
                                     ", not printable ASCII: send the signal's name (e.g. SIGTERM)");
    }
  }
  if (!std::isfinite(remaining_s) || remaining_s <= 0 || remaining_s > kMaxPreemptRemainingS) {
    char value[48];
    std::snprintf(value, sizeof value, "%g", remaining_s);
    return Status::InvalidArgument(std::string("preemption notice: remaining_s ") + value +
                                   " is not a number of seconds in (0, 604800] (7 days): send the time left "
                                   "before the node goes away");
  }
  return Status::Ok();
}

// The run's first valid notice is pushed to every node the run holds but
// its sender (once closed it holds none: the members still finishing have
// no stream left to push on); later ones are counted.
void RendezvousMachine::OnPreempt(const Preempt& preempt, TimePoint now, std::vector<Decision>& out) {
  if (!CheckPreempt(preempt.remaining_s, preempt.source).ok()) return;
  if (preempt_) {
    ++preempt_->notices;
    return;
  }
  preempt_ = PreemptRecord{preempt.node, preempt.remaining_s, preempt.source, now, 1};
  PreemptNotice notice{preempt.node, preempt.remaining_s, preempt.source, {}};
  for (const auto& [id, rec] : nodes_) {
    if (!(id == preempt.node)) notice.nodes.push_back(id);
  }
  out.push_back(std::move(notice));
}

}  // namespace ctrun::rdzv
