// HealthChecker: what the agent needs from a node health check
// (--health-check CMD): run it, learn whether the node is healthy.
//
// The real one is CommandHealthCheck (command_check.h: runs CMD under
// /bin/sh); tests/launcher/agent_test.cc scripts a fake one. The result is
// an event (a callback), never waited for: the agent's loop runs on.
//
// Thread model: every call and callback happens on the agent's io_context.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ctrun::launcher {

struct HealthResult {
  bool healthy = true;
  // Why not, in a few words: "exited with 1", "killed by SIGSEGV",
  // "timed out after 30 s", "could not start: ...". Empty when healthy.
  std::string failure;
  std::vector<std::string> last_lines;  // the check's last output lines (stdout and stderr)
};

// One text for logs, the failure report and the rendezvous: the command,
// why it failed, then the last output lines (each on its own line, "  "
// indented); e.g. "health check 'check.sh' exited with 1\n  GPU 3: ECC error".
std::string FormatHealthReport(const std::string& command, const HealthResult& result);

class HealthChecker {
 public:
  using Done = std::function<void(const HealthResult&)>;

  virtual ~HealthChecker() = default;

  // Runs the check once; `done` runs once with its result, on the
  // io_context and never inside this call. One run at a time: Run while a
  // run is under way is a bug.
  virtual void Run(Done done) = 0;

  // Stops a run under way (its process is killed); its `done` never runs.
  // No-op when none is under way.
  virtual void Cancel() = 0;

  // The command, as the user gave it (for messages).
  virtual const std::string& command() const = 0;
};

}  // namespace ctrun::launcher
