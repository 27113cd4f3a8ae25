// What both example programs (ctrun-fashion-mnist, ctrun-gpt) do around
// their Run in main: the prologue (the tests' fork server, glog quieted),
// argv as the flag parsers take it, and the end — a thrown exception turned
// into one Internal line, and a failure written as "<program>: <message>"
// on stderr and to the error file (error_file.h), with its exit code
// (exit_codes.h).
//
// app_main.cc is compiled into each program (ctrun_trainer_app), where
// CTRUN_HAVE_GLOG is known. Thread model: main's thread, before any other.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/apps/exit_codes.h"

namespace ctrun::trainer {

// main's first step: serves forks if the tests asked (fork_server.h: the
// server never returns; a forked rank returns with `argc` and `argv`
// replaced by its request's), and raises glog's threshold to FATAL unless
// GLOG_minloglevel is set (our errors are one line each; c10d's glog copies
// of them are noise).
void StartApp(int& argc, char**& argv);

// argv[1..].
std::vector<std::string> AppArgs(int argc, char** argv);

// "<program>: <message>" on stderr and the message in the error file;
// returns `code`.
int EndWithError(const char* program, const Status& status, int code);

// How Run ended: OK with the exit code (0, or 1 after a preemption notice
// with nothing saved), or the failure and its exit code.
struct AppOutcome {
  Status status;
  int code = kExitFailure;
};

// Runs `run`; an exception it throws is a failure (Internal, its first line
// without c10's backtrace, exit 1). A failure ends through EndWithError.
// Returns the exit code.
int FinishApp(const char* program, const std::function<AppOutcome()>& run);

}  // namespace ctrun::trainer
