// MakeEtcdRendezvous and EtcdSupport in a build without etcd's .proto files
// (see proto/CMakeLists.txt).
#include "launcher/rdzv/etcd_rendezvous.h"

namespace ctrun::launcher {

Status EtcdSupport() {
  return Status::InvalidArgument(
      "--rdzv-backend etcd-v3: this ctrun was built without etcd support (run scripts/install-deps.sh, which "
      "unpacks etcd's .proto files, and rebuild), or use --rdzv-backend c10d");
}

Result<std::unique_ptr<RendezvousHandler>> MakeEtcdRendezvous(boost::asio::io_context&, const std::string&,
                                                              EtcdRendezvousOptions) {
  return EtcdSupport();
}

}  // namespace ctrun::launcher
