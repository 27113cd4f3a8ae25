// store_server: ctrun's workers' store (rendezvous/store's StoreServer) in a
// process of its own, for bench/store.sh: the same server the agent hosts,
// on one Asio loop, without the agent around it, so that /proc/PID/stat of
// this process is the store's CPU time and nothing else.
//
// Usage: store_server [HOST] [PORT]   (default 127.0.0.1 and 0: a free port)
// Prints the bound port on a line of its own, then serves until killed.
// Exit codes: 0 never (it serves until a signal ends it); 1 when the port
// cannot be bound (the reason is printed); 2 for bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <boost/asio/io_context.hpp>

#include "rendezvous/store/store_server.h"

int main(int argc, char** argv) {
  if (argc > 3 || (argc > 1 && std::string(argv[1]) == "--help")) {
    std::fprintf(stderr, "usage: store_server [HOST] [PORT]  (default 127.0.0.1 0)\n");
    return 2;
  }
  const std::string host = argc > 1 ? argv[1] : "127.0.0.1";
  char* end = nullptr;
  const long port = argc > 2 ? std::strtol(argv[2], &end, 10) : 0;
  if (argc > 2 && (*end != '\0' || port < 0 || port > 65535)) {
    std::fprintf(stderr, "store_server: PORT '%s' is not a port number (0-65535)\n", argv[2]);
    return 2;
  }
  boost::asio::io_context io(1);
  ctrun::rdzv::StoreServer server(io);
  if (ctrun::Status st = server.Listen(host, static_cast<int>(port)); !st.ok()) {
    std::fprintf(stderr, "store_server: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("%d\n", server.port());
  std::fflush(stdout);
  io.run();
  return 0;
}
