#include "launcher/rdzv/remote_phase.h"

namespace ctrun::launcher {

void EnterShutdown(RemotePhase& phase,
                   std::initializer_list<std::reference_wrapper<boost::asio::steady_timer>> timers) {
  phase = RemotePhase::kShutdown;
  for (boost::asio::steady_timer& timer : timers) timer.cancel();
}

}  // namespace ctrun::launcher
