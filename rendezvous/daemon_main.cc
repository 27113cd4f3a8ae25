// ctrund: the standalone rendezvous daemon. Serves any number of run ids
// (each created by its first Join) until SIGTERM or SIGINT. docs/daemon.md.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "rendezvous/server.h"

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

struct DaemonFlags {
  std::string listen = "0.0.0.0:29400";
  std::string token_file;
  std::string log_level = "info";
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "ctrund: %s (see ctrund --help)\n", message.c_str());
  return kExitUsage;
}

// The token from --token-file (trailing whitespace dropped), else from
// CTRUN_RDZV_TOKEN, else "" (no token). False when the file cannot be read.
bool ReadToken(const DaemonFlags& flags, std::string& token) {
  if (flags.token_file.empty()) {
    const char* env = std::getenv("CTRUN_RDZV_TOKEN");
    token = env ? env : "";
    return true;
  }
  std::ifstream in(flags.token_file);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonFlags flags;
  CLI::App app("ctrund: the ctrun rendezvous daemon. Serves every --rdzv-id that joins it.", "ctrund");
  app.add_option("--listen", flags.listen, "HOST:PORT to listen on (port 0 picks one)")->capture_default_str();
  app.add_option("--token-file", flags.token_file,
                 "file holding the shared token every node must send (default: $CTRUN_RDZV_TOKEN; none if unset)");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return Usage(e.what());
  }

  std::string token;
  if (!ReadToken(flags, token)) {
    return Usage("--token-file '" + flags.token_file + "': cannot read it (give a readable file holding the token)");
  }

  auto logger = spdlog::stderr_color_mt("ctrund");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [ctrund] [%l] %v");
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  ctrun::rdzv::RouteGrpcLogsToSpdlog();

  // Blocked before any thread starts, so only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ctrun::rdzv::ServerOptions options;
  options.listen_address = flags.listen;
  options.mode = ctrun::rdzv::RunRegistry::Mode::kAutoCreate;
  options.token = token;
  auto server = ctrun::rdzv::RendezvousServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "ctrund: %s\n", server.status().message().c_str());
    return server.status().IsInvalidArgument() ? kExitUsage : kExitFailure;
  }
  std::printf("ctrund: serving rendezvous on %s\n", (*server)->address().c_str());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("got {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  return 0;
}
