// store_server: ctrun's workers' store (rendezvous/store's StoreServer) in a
// process of its own, for bench/store.sh: the same server the agent hosts,
// on one Asio loop, without the agent around it, so that /proc/PID/stat of
// this process is the store's CPU time and nothing else.
//
// Usage: store_server [HOST] [PORT] [--max-per-address N] [--max-connections N]
//   HOST, PORT: default 127.0.0.1 and 0 (a free port). The caps default to
//   the server's own (StoreServer::kMaxConnectionsPerAddress and
//   kMaxConnections); tests lower them to meet them with a few clients.
// Prints the bound port on a line of its own, then serves until killed.
// Exit codes: 0 never (it serves until a signal ends it); 1 when the port
// cannot be bound (the reason is printed); 2 for bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rendezvous/store/store_server.h"

namespace {

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "store_server: %s\n"
               "usage: store_server [HOST] [PORT] [--max-per-address N] [--max-connections N]"
               "  (default 127.0.0.1 0)\n",
               why.c_str());
  std::exit(2);
}

long Whole(const std::string& what, const std::string& text, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi) {
    Usage(what + " '" + text + "' is not a number from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  size_t per_address = ctrun::rdzv::StoreServer::kMaxConnectionsPerAddress;
  size_t total = ctrun::rdzv::StoreServer::kMaxConnections;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") Usage("help");
    if (a == "--max-per-address" || a == "--max-connections") {
      if (i + 1 >= argc) Usage(a + " wants a value");
      const long v = Whole(a, argv[++i], 1, 1L << 20);
      (a == "--max-per-address" ? per_address : total) = static_cast<size_t>(v);
      continue;
    }
    positional.push_back(a);
  }
  if (positional.size() > 2) Usage("too many arguments");
  const std::string host = positional.size() > 0 ? positional[0] : "127.0.0.1";
  const long port = positional.size() > 1 ? Whole("PORT", positional[1], 0, 65535) : 0;
  boost::asio::io_context io(1);
  ctrun::rdzv::StoreServer server(io);
  server.set_connection_limits(per_address, total);
  if (ctrun::Status st = server.Listen(host, static_cast<int>(port)); !st.ok()) {
    std::fprintf(stderr, "store_server: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("%d\n", server.port());
  std::fflush(stdout);
  io.run();
  return 0;
}
