// RouteGrpcLogsToSpdlog (declared in grpc_process.h): gRPC's and protobuf's
// log lines through spdlog, a failed TLS handshake as a rate-limited warning.
#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "rendezvous/grpc/net/grpc_process.h"

namespace ctrun::rdzv {

namespace {
std::atomic<bool> warn_handshake_failures{false};

// gRPC's "Security handshake failed: <status> {... target_address:"ipv4:..." ...}"
// as "TLS handshake with ipv4:... failed: <status>".
std::string HandshakeLine(const std::string& message) {
  std::string peer = "a client";
  const std::string key = "target_address:\"";
  if (size_t at = message.find(key); at != std::string::npos) {
    size_t end = message.find('"', at + key.size());
    if (end != std::string::npos) peer = message.substr(at + key.size(), end - at - key.size());
  }
  std::string what = message.substr(0, message.find(" {"));
  if (what.rfind("Security handshake failed: ", 0) == 0) what = what.substr(27);
  return "TLS handshake with " + peer + " failed: " + what +
         " (its CA, certificate or TLS setting does not match this server's: see docs/security.md)";
}
}  // namespace

void RouteGrpcLogsToSpdlog(bool warn_handshakes) {
  warn_handshake_failures = warn_handshakes;
  // protobuf logs each refused message (e.g. a string that is not UTF-8)
  // on stderr: a stranger could fill the log with them.
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char* file, int line, const std::string& message) {
    spdlog::debug("protobuf {}:{}: {}", file, line, message);
  });
  // The server side of a failed handshake is a debug message in gRPC.
  if (warn_handshakes) gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (warn_handshake_failures && std::strstr(args->message, "andshake failed") != nullptr) {
      static std::atomic<int64_t> next_ns{0};
      const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
      int64_t due = next_ns.load();
      if (now >= due && next_ns.compare_exchange_strong(due, now + 1'000'000'000)) {
        spdlog::warn("{}", HandshakeLine(args->message));
      }
      return;
    }
    spdlog::debug("grpc {}:{}: {}", args->file, args->line, args->message);
  });
}

}  // namespace ctrun::rdzv
