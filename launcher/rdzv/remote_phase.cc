#include "launcher/rdzv/remote_phase.h"

#include <boost/asio/post.hpp>

#include "launcher/net/free_port.h"

namespace ctrun::launcher {

void EnterShutdown(RemotePhase& phase,
                   std::initializer_list<std::reference_wrapper<boost::asio::steady_timer>> timers) {
  phase = RemotePhase::kShutdown;
  for (boost::asio::steady_timer& timer : timers) timer.cancel();
}

std::optional<int> BeginJoin(boost::asio::io_context& io, std::optional<int> store_port,
                             std::function<void(Result<Round>)> done, RemotePhase& phase,
                             std::function<void(Result<Round>)>& pending) {
  Result<int> port = store_port ? Result<int>(*store_port) : FindFreePort();
  if (!port.ok()) {
    boost::asio::post(io, [done = std::move(done), s = port.status()] { done(s); });
    return std::nullopt;
  }
  phase = RemotePhase::kJoining;
  pending = std::move(done);
  return *port;
}

}  // namespace ctrun::launcher
