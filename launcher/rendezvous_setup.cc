#include "launcher/rendezvous_setup.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launcher/grpc_rendezvous_setup.h"
#include "launcher/local_rendezvous.h"

namespace ctrun::launcher {

namespace {

constexpr char kPluginName[] = "libctrun_multinode.so";

std::string ExecutableDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// Next to the binary (the build tree), or in ../lib/ctrun (an install).
Result<MultiNodeEntry> LoadPlugin() {
  const std::string dir = ExecutableDir();
  std::string errors;
  for (const std::string& path : {dir + "/" + kPluginName, dir + "/../lib/ctrun/" + kPluginName}) {
    if (::access(path.c_str(), R_OK) != 0) continue;
    void* handle = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (!handle) {
      errors += std::string(" ") + ::dlerror();
      continue;
    }
    if (void* entry = ::dlsym(handle, kMultiNodeEntry)) return reinterpret_cast<MultiNodeEntry>(entry);
    errors += " " + path + " has no " + kMultiNodeEntry;
  }
  return Status::Unavailable("multi-node support (" + std::string(kPluginName) + ") cannot be loaded from " +
                             dir + " or " + dir + "/../lib/ctrun:" +
                             (errors.empty() ? std::string(" not found") : errors) +
                             "; reinstall ctrun");
}

}  // namespace

Result<std::unique_ptr<RendezvousHandler>> MakeRendezvous(boost::asio::io_context& io,
                                                          const LaunchConfig& config,
                                                          const Environment& env) {
  if (config.is_single_node()) {
    const std::string master_addr = config.local_addr.value_or(config.master_addr);
    const int fixed_port = config.master_port_given ? config.master_port : 0;
    return std::unique_ptr<RendezvousHandler>(std::make_unique<LocalRendezvous>(
        io, config.rdzv_id, config.nproc_per_node, master_addr, fixed_port));
  }
  Result<MultiNodeEntry> entry = LoadPlugin();
  if (!entry.ok()) return entry.status();
  MultiNodeArgs args{&io, &config, &env};
  MultiNodeResult result;
  (*entry)(&args, &result);
  if (!result.handler) return result.status;
  return std::move(result.handler);
}

}  // namespace ctrun::launcher
