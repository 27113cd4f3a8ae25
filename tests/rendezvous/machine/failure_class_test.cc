// The class of one failure (rendezvous/machine/failure_class.h): every
// class from its evidence, and which evidence wins when several apply.
#include "rendezvous/machine/failure_class.h"

#include <catch2/catch.hpp>

#include <csignal>

namespace ctrun::rdzv {
namespace {

FailureEvidence Exited(int code, const std::string& message = "", const std::string& last_line = "") {
  FailureEvidence e;
  e.exit_code = code;
  e.error_message = message;
  e.last_line = last_line;
  return e;
}

FailureEvidence Signalled(int sig, std::optional<int64_t> oom_before = std::nullopt,
                          std::optional<int64_t> oom_after = std::nullopt) {
  FailureEvidence e;
  e.signal = sig;
  e.oom_kills_before = oom_before;
  e.oom_kills_after = oom_after;
  return e;
}

FailureClass ClassOf(const FailureEvidence& e) { return ClassifyFailure(e).cls; }

TEST_CASE("failure class: every name reads back") {
  for (int i = 0; i <= static_cast<int>(FailureClass::kPythonException); ++i) {
    const auto cls = static_cast<FailureClass>(i);
    CAPTURE(i);
    CHECK(ParseFailureClass(FailureClassName(cls)) == cls);
  }
  CHECK(FailureClassName(FailureClass::kOomKilled) == "oom_killed");
  CHECK(FailureClassName(FailureClass::kDiskFull) == "disk_full");
  CHECK(!ParseFailureClass("oom"));
}

TEST_CASE("failure class: SIGKILL with the cgroup's oom_kill count up is the OOM killer") {
  const FailureCause oom = ClassifyFailure(Signalled(SIGKILL, 0, 1));
  CHECK(oom.cls == FailureClass::kOomKilled);
  CHECK(oom.text == "was killed by the kernel's OOM killer (oom_kill 0->1 in its cgroup)");
  FailureEvidence big = Signalled(SIGKILL, 2, 3);
  big.max_rss_kib = 24222105;  // 23.1 GiB
  CHECK(ClassifyFailure(big).text == "was killed by the kernel's OOM killer (oom_kill 2->3 in its cgroup, peak RSS 23.1 GiB)");
  big.max_rss_kib = 512 * 1024;
  CHECK(ClassifyFailure(big).text == "was killed by the kernel's OOM killer (oom_kill 2->3 in its cgroup, peak RSS 512 MiB)");
  const FailureCause plain = ClassifyFailure(Signalled(SIGKILL, 3, 3));
  CHECK(plain.cls == FailureClass::kKilledBySignal);
  CHECK(plain.text == "was killed by SIGKILL; no OOM kill in its cgroup");
  CHECK(ClassifyFailure(Signalled(SIGKILL)).text == "was killed by SIGKILL; its cgroup's OOM count was not readable");
  // An OOM count up does not make another signal an OOM kill.
  CHECK(ClassOf(Signalled(SIGTERM, 0, 1)) == FailureClass::kKilledBySignal);
  CHECK(ClassifyFailure(Signalled(SIGTERM)).text == "was killed by SIGTERM");
}

TEST_CASE("failure class: crash signals by name, with the last line when there is one") {
  CHECK(ClassOf(Signalled(SIGSEGV)) == FailureClass::kSegfault);
  CHECK(ClassOf(Signalled(SIGBUS)) == FailureClass::kBusError);
  CHECK(ClassOf(Signalled(SIGILL)) == FailureClass::kIllegalInstruction);
  CHECK(ClassOf(Signalled(SIGFPE)) == FailureClass::kArithmeticError);
  FailureEvidence abort = Signalled(SIGABRT);
  abort.last_line = "terminate called after throwing an instance of 'c10::Error'";
  // A signal outranks the text: abort, not python_exception.
  abort.error_message = "RuntimeError: boom";
  const FailureCause cause = ClassifyFailure(abort);
  CHECK(cause.cls == FailureClass::kAbort);
  CHECK(cause.text == "aborted (SIGABRT); its last line: terminate called after throwing an instance of 'c10::Error'");
  CHECK(ClassifyFailure(Signalled(SIGSEGV)).text == "crashed with a segmentation fault (SIGSEGV)");
}

TEST_CASE("failure class: exit status 128 + N without an error text is signal N (a shell in between)") {
  FailureEvidence e = Exited(137);
  e.oom_kills_before = 2;
  e.oom_kills_after = 3;
  CHECK(ClassOf(e) == FailureClass::kOomKilled);
  const FailureCause segv = ClassifyFailure(Exited(139));
  CHECK(segv.cls == FailureClass::kSegfault);
  CHECK(segv.text == "crashed with a segmentation fault (exit code 139, 128 + SIGSEGV)");
  // With an error text, the program chose that status itself.
  CHECK(ClassOf(Exited(137, "ValueError: bad")) == FailureClass::kPythonException);
}

TEST_CASE("failure class: the error text, most specific class first") {
  const std::vector<std::pair<std::string, FailureClass>> cases = {
      {"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", FailureClass::kCudaOom},
      {"RuntimeError: CUDA out of memory in ProcessGroupNCCL", FailureClass::kCudaOom},
      {"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error", FailureClass::kNcclError},
      {"OSError: [Errno 28] No space left on device: '/ckpt/step_10.pt'", FailureClass::kDiskFull},
      {"FileNotFoundError: [Errno 2] No such file or directory: 'data.bin'", FailureClass::kFileNotFound},
      {"ModuleNotFoundError: No module named 'apex'", FailureClass::kImportError},
      {"ImportError: cannot import name 'x' from 'y'", FailureClass::kImportError},
      {"FloatingPointError: loss became non-finite", FailureClass::kNanOrInf},
      {"RuntimeError: loss is NaN at step 12", FailureClass::kNanOrInf},
      {"ValueError: grad norm is inf", FailureClass::kNanOrInf},
      {"ValueError: information is missing", FailureClass::kPythonException},  // "inf" only as a word
      {"RuntimeError: Connection reset by peer", FailureClass::kConnectionError},
      {"KeyError: 'labels'", FailureClass::kPythonException},
  };
  for (const auto& [text, cls] : cases) {
    CAPTURE(text);
    CHECK(ClassOf(Exited(1, text)) == cls);
  }
  const FailureCause disk = ClassifyFailure(Exited(1, "OSError: [Errno 28] No space left on device"));
  CHECK(disk.text == "ran out of disk space: OSError: [Errno 28] No space left on device");
  CHECK(ClassifyFailure(Exited(1, "KeyError: 'labels'")).text == "raised KeyError: 'labels'");
}

TEST_CASE("failure class: the error file's message before the stderr line; a bare line is not an exception") {
  CHECK(ClassOf(Exited(1, "ValueError: bad", "RuntimeError: NCCL error")) == FailureClass::kPythonException);
  CHECK(ClassOf(Exited(1, "", "ModuleNotFoundError: No module named 'apex'")) == FailureClass::kImportError);
  CHECK(ClassOf(Exited(1, "", "AssertionError: shapes differ")) == FailureClass::kPythonException);
  const FailureCause bare = ClassifyFailure(Exited(3, "", "giving up"));
  CHECK(bare.cls == FailureClass::kUnknown);
  CHECK(bare.text == "exited with code 3; its last line: giving up");
  CHECK(ClassifyFailure(Exited(1)).text == "exited with code 1; no error file and no stderr line");
}

TEST_CASE("failure class: what the agent and the rendezvous saw outranks how the process ended") {
  FailureEvidence e = Signalled(SIGKILL, 0, 1);
  e.error_message = "RuntimeError: CUDA out of memory";
  e.stopped_by_agent = true;
  CHECK(ClassOf(e) == FailureClass::kStopped);
  e.straggler = true;
  CHECK(ClassOf(e) == FailureClass::kStragglerTimeout);
  e.hung = true;
  e.hang_frame = "train.py:42 in step";
  CHECK(ClassifyFailure(e) ==
        FailureCause{FailureClass::kHang, "hung (no heartbeat or step in time), innermost frame train.py:42 in step"});
  e.unhealthy = true;
  e.health_reason = "GPU 3: Xid 79";
  CHECK(ClassifyFailure(e) == FailureCause{FailureClass::kUnhealthyNode, "failed its health check: GPU 3: Xid 79"});
  e.node_lost = true;
  CHECK(ClassOf(e) == FailureClass::kNodeLost);
  FailureEvidence exec = Exited(127, "", "ctrun: cannot run 'train.sh': Permission denied");
  exec.exec_failed = true;
  CHECK(ClassifyFailure(exec) ==
        FailureCause{FailureClass::kBadLaunch, "could not be started: ctrun: cannot run 'train.sh': Permission denied"});
}

TEST_CASE("failure class: a long error text is clipped for the one line") {
  const FailureCause cause = ClassifyFailure(Exited(1, "ValueError: " + std::string(500, 'x')));
  CHECK(cause.text.size() == std::string("raised ").size() + 200 + 3);
  CHECK(cause.text.substr(cause.text.size() - 3) == "...");
}

TEST_CASE("failure class: the exception type at the head of a message") {
  CHECK(ExceptionType("torch.cuda.OutOfMemoryError: CUDA out of memory") == "torch.cuda.OutOfMemoryError");
  CHECK(ExceptionType("KeyError: 'x'") == "KeyError");
  CHECK(ExceptionType("KeyboardInterrupt: ") == "KeyboardInterrupt");
  CHECK(ExceptionType("Traceback (most recent call last):") == "");
  CHECK(ExceptionType("error: something") == "");
  CHECK(ExceptionType("ValueError") == "");  // no message part
  CHECK(ExceptionType("Step 3: loss 0.1") == "");
}

TEST_CASE("failure class: a bad launch is every rank failing at once with the same error") {
  auto quick = [](double runtime, const std::string& text) {
    FailureEvidence e = Exited(2, "", text);
    e.runtime_s = runtime;
    return e;
  };
  const std::string missing = "python3: can't open file '/job/trian.py': [Errno 2] No such file or directory";
  CHECK(IsBadLaunch({quick(0.1, missing), quick(0.2, missing)}, 2));
  CHECK(!IsBadLaunch({quick(0.1, missing)}, 2));                           // one rank of two
  CHECK(!IsBadLaunch({quick(0.1, missing), quick(1.5, missing)}, 2));      // one ran a while
  CHECK(!IsBadLaunch({quick(0.1, missing), quick(0.1, "KeyError: 'x'")}, 2));  // not the same error
  // No text: the same exit code is the same error; another code is not.
  CHECK(IsBadLaunch({quick(0.1, ""), quick(0.1, "")}, 2));
  FailureEvidence other_code = quick(0.1, "");
  other_code.exit_code = 3;
  CHECK(!IsBadLaunch({quick(0.1, ""), other_code}, 2));
  CHECK(!IsBadLaunch({quick(-1, missing), quick(0.1, missing)}, 2));       // a start time unknown
  // A rank its agent stopped, or one killed by a signal, is no bad launch:
  // the agent waits out the window, so every rank of one fails on its own.
  FailureEvidence stopped = Signalled(SIGTERM);
  stopped.runtime_s = 0.15;
  stopped.stopped_by_agent = true;
  CHECK(!IsBadLaunch({quick(0.1, missing), stopped}, 2));
  CHECK(!IsBadLaunch({stopped, stopped}, 2));
  FailureEvidence segv = Signalled(SIGSEGV);
  segv.runtime_s = 0.1;
  CHECK(!IsBadLaunch({segv, segv}, 2));
  // One rank alone failing early is no bad launch: it could be any failure.
  CHECK(!IsBadLaunch({quick(0.1, missing)}, 1));
  FailureEvidence exec1 = Exited(127);
  exec1.exec_failed = true;
  CHECK(IsBadLaunch({exec1}, 1));
  // A restart may fix a lost connection, NCCL, or a GPU another job holds.
  const std::string refused = "RuntimeError: Connection refused";
  CHECK(!IsBadLaunch({quick(0.1, refused), quick(0.1, refused)}, 2));
  const std::string cuda = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";
  CHECK(!IsBadLaunch({quick(0.1, cuda), quick(0.1, cuda)}, 2));
  FailureEvidence exec = Exited(127);
  exec.exec_failed = true;
  CHECK(IsBadLaunch({exec, exec, exec}, 3));
  // A failure of a bad launch's attempt is classed so, with its error.
  FailureEvidence marked = quick(0.1, missing);
  marked.bad_launch = true;
  CHECK(ClassifyFailure(marked) ==
        FailureCause{FailureClass::kBadLaunch, "failed within 1 s of its start, as every rank did: " + missing});
  FailureEvidence bare = quick(0.1, "");
  bare.bad_launch = true;
  CHECK(ClassifyFailure(bare).text == "failed within 1 s of its start, as every rank did: exited with code 2");
  CHECK(!IsBadLaunch({}, 0));
}

}  // namespace
}  // namespace ctrun::rdzv
