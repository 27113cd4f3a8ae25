#include "trainer/apps/app_main.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#if defined(CTRUN_HAVE_GLOG)
#include <glog/logging.h>
#endif

#include "trainer/apps/error_file.h"
#include "trainer/apps/fork_server.h"
#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {

void StartApp(int& argc, char**& argv) {
  ServeForksIfAsked(argc, argv);  // the tests' fast rank starts (fork_server.h)
#if defined(CTRUN_HAVE_GLOG)
  if (std::getenv("GLOG_minloglevel") == nullptr) FLAGS_minloglevel = google::GLOG_FATAL;
#endif
}

std::vector<std::string> AppArgs(int argc, char** argv) { return std::vector<std::string>(argv + 1, argv + argc); }

int EndWithError(const char* program, const Status& status, int code) {
  std::fprintf(stderr, "%s: %s\n", program, status.message().c_str());
  WriteErrorFile(status.message());
  return code;
}

int FinishApp(const char* program, const std::function<AppOutcome()>& run) {
  AppOutcome outcome;
  try {
    outcome = run();
  } catch (const std::exception& error) {
    outcome = {Status::Internal(TorchErrorLine(error)), kExitFailure};
  }
  if (!outcome.status.ok()) return EndWithError(program, outcome.status, outcome.code);
  return outcome.code;
}

}  // namespace ctrun::trainer
