// StartFaultTolerance in the one-node `ctrun`, which hands every launch with
// --ft-replicas to ctrun-full before it starts anything (ft_setup.h).
#include "launcher/ft/ft_setup.h"

namespace ctrun::launcher {

Result<std::unique_ptr<FtRuntime>> StartFaultTolerance(boost::asio::io_context&, const LaunchConfig&,
                                                       const Environment&, EventLog*) {
  return Status::FailedPrecondition(
      "--ft-replicas runs in ctrun-full; this ctrun should have handed the launch over to it");
}

}  // namespace ctrun::launcher
