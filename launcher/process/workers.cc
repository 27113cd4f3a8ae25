#include "launcher/process/workers.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <boost/asio/post.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "launcher/process/orphan_guard.h"
#include "launcher/forensics/proc_stat.h"
#include "launcher/forensics/stack_dump.h"

namespace ctrun::launcher {

namespace {

constexpr int kWorkerPipeBytes = 256 << 10;

std::string Errno(int err) { return std::strerror(err); }

// The file descriptor a child should dup onto stdout/stderr, or -1 to inherit.
// For Mode::kPipe, *read_end receives the parent's end.
Status OpenTarget(const StdioTarget& t, int* child_fd, int* read_end) {
  *child_fd = -1;
  *read_end = -1;
  switch (t.mode) {
    case StdioTarget::Mode::kInherit:
      return Status::Ok();
    case StdioTarget::Mode::kNull:
      *child_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (*child_fd < 0) return Status::IOError("cannot open /dev/null: " + Errno(errno));
      return Status::Ok();
    case StdioTarget::Mode::kFile:
      *child_fd = ::open(t.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (*child_fd < 0) {
        return Status::IOError("cannot open log file " + t.path + ": " + Errno(errno) +
                               " (check --log-dir)");
      }
      return Status::Ok();
    case StdioTarget::Mode::kPipe: {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError("pipe: " + Errno(errno));
      // A roomier pipe (256 KiB: 50 MB/s for StreamTee's pause between
      // reads) lets the tee read it in a few large reads without the worker
      // waiting on it; small enough that a node's workers stay far inside a
      // user's pipe quota (64 MiB by default). Where the size is refused,
      // the default 64 KiB stays.
      (void)::fcntl(fds[0], F_SETPIPE_SZ, kWorkerPipeBytes);
      *read_end = fds[0];
      *child_fd = fds[1];
      return Status::Ok();
    }
  }
  return Status::Internal("unknown stdio mode");
}

void CloseIfOpen(int fd) {
  if (fd >= 0) ::close(fd);
}

// What a child reports on its status pipe when it cannot become the worker:
// the errno, and the step that failed. End-of-file means it ran.
struct ChildFailure {
  int err = 0;
  PreparedBinding::Step step = PreparedBinding::Step::kNone;  // kNone: exec failed
};

// Runs in the vforked child (VforkExec): only async-signal-safe calls until
// exec, and nothing that writes memory but its own stack — it shares ctrun's
// until exec (no malloc, no C++ objects, no library that may allocate; the
// CPU binding was prepared in the parent and applies with system calls only).
[[noreturn]] void ExecChild(pid_t parent, char* const argv[], char* const envp[], int out_fd,
                            int err_fd, int status_fd, const std::vector<int>& reset,
                            const PreparedBinding& binding, bool ptraceable, const struct rlimit* nofile) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // ctrun died before prctl took effect
  // Hang forensics: gdb, a child of ctrun, may attach under Yama's
  // ptrace_scope 1 (EINVAL without Yama: nothing to allow).
  if (ptraceable) ::prctl(PR_SET_PTRACER, parent, 0, 0, 0);
  ::setsid();
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig : reset) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (out_fd >= 0) ::dup2(out_fd, STDOUT_FILENO);
  if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
  if (nofile != nullptr) ::setrlimit(RLIMIT_NOFILE, nofile);  // as it was before ctrun raised it
  ChildFailure failure;
  failure.err = binding.Apply(&failure.step);
  if (failure.err == 0) {
    ::execvpe(argv[0], argv, envp);
    failure.err = errno;
  }
  ssize_t ignored = ::write(status_fd, &failure, sizeof(failure));
  (void)ignored;
  ::_exit(127);
}

// vfork, not fork: ctrun's page tables are neither copied for each worker
// nor torn down again by its exec, which made up most of ctrun's own launch
// cost (docs/benchmarks.md, Launch). The calling thread waits until the child
// has exec'd or exited. Every signal stays blocked meanwhile, so that none of
// ctrun's handlers runs in the child, which shares ctrun's memory; the child
// resets the dispositions before it unblocks them.
pid_t VforkExec(pid_t parent, char* const argv[], char* const envp[], int out_fd, int err_fd,
                int status_fd, const std::vector<int>& reset, const PreparedBinding& binding,
                bool ptraceable, const struct rlimit* nofile) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::vfork();
  if (pid == 0) ExecChild(parent, argv, envp, out_fd, err_fd, status_fd, reset, binding, ptraceable, nofile);
  const int saved = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return pid;
}

// Reads each forked child's exec result (status_fds[i] belongs to specs[i])
// and closes the fds. A child writes its errno there only when exec failed;
// end-of-file means it ran. Returns the first failure.
Status AwaitExecs(const std::vector<WorkerSpec>& specs, const std::vector<int>& status_fds) {
  Status s;
  for (size_t i = 0; i < status_fds.size(); ++i) {
    ChildFailure failure;
    ssize_t n;
    do {
      n = ::read(status_fds[i], &failure, sizeof(failure));
    } while (n < 0 && errno == EINTR);
    ::close(status_fds[i]);
    const int child_errno = failure.err;
    if (s.ok() && n == static_cast<ssize_t>(sizeof(failure)) &&
        failure.step != PreparedBinding::Step::kNone) {
      s = Status::FailedPrecondition(
          "cannot bind worker local_rank " + std::to_string(specs[i].local_rank) + ": " +
          (failure.step == PreparedBinding::Step::kCpus ? "sched_setaffinity: " : "set_mempolicy: ") +
          Errno(child_errno) + " (its binding: " + specs[i].binding.summary + ")");
    } else if (s.ok() && n == static_cast<ssize_t>(sizeof(failure))) {
      const std::string& argv0 = specs[i].argv[0];
      s = child_errno == ENOENT
              ? Status::NotFound("cannot run '" + argv0 + "': " + Errno(child_errno))
              : Status::FailedPrecondition("cannot run '" + argv0 + "': " + Errno(child_errno));
    }
  }
  return s;
}

}  // namespace

int ExitCodeFromWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) return -WTERMSIG(wait_status);
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return -1;
}

// ---------------------------------------------------------------- Reaper

Reaper::Reaper(boost::asio::io_context& io) : sigchld_(io, SIGCHLD) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    spdlog::warn("cannot become a child subreaper ({}); orphaned grandchildren of workers "
                 "will be reaped by init instead",
                 Errno(errno));
  }
  Arm();
}

void Reaper::Register(pid_t pid, ExitCallback cb) { waiting_[pid] = std::move(cb); }

void Reaper::Arm() {
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    ReapAll();
    Arm();
  });
}

void Reaper::ReapAll() {
  for (;;) {
    int status = 0;
    struct rusage usage {};
    pid_t pid = ::wait4(-1, &status, WNOHANG, &usage);
    if (pid <= 0) break;
    auto it = waiting_.find(pid);
    if (it == waiting_.end()) continue;  // an orphan re-parented to us
    ExitCallback cb = std::move(it->second);
    waiting_.erase(it);
    cb(pid, status, static_cast<int64_t>(usage.ru_maxrss));
  }
  if (on_any_) on_any_();
}

// ---------------------------------------------------------------- WorkerSet

WorkerSet::WorkerSet(boost::asio::io_context& io, ChildReaper& reaper, OrphanGuard* guard)
    : io_(io), reaper_(reaper), guard_(guard), kill_timer_(io), stuck_timer_(io) {}

WorkerSet::~WorkerSet() {
  if (dump_) dump_->Abandon();
  for (Worker& w : workers_) {
    if (!w.group_empty) ::killpg(w.pid, SIGKILL);
  }
}

Status WorkerSet::Start(const std::vector<WorkerSpec>& specs, ExitHandler on_exit,
                        std::vector<std::pair<int, int>>* pipes) {
  workers_.clear();
  on_exit_ = std::move(on_exit);
  closing_ = false;
  pipes->assign(specs.size(), {-1, -1});
  const pid_t self = ::getpid();
  // exec resets caught signals itself; ignored ones it keeps. Both kinds are
  // reset in the child, before it unblocks signals: 64 sigaction calls per
  // worker cost more than the rest of its set-up.
  reset_signals_.clear();
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction now;
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_DFL) {
      reset_signals_.push_back(sig);
    }
  }

  // Fork every worker first, then collect their exec results: the workers'
  // exec and dynamic loading overlap instead of running one after another.
  std::vector<int> status_fds;
  Status s;
  for (size_t i = 0; i < specs.size() && s.ok(); ++i) {
    s = Fork(specs[i], self, &(*pipes)[i], &status_fds);
  }
  Status exec = AwaitExecs(specs, status_fds);
  if (s.ok()) s = exec;
  if (!s.ok()) {
    for (auto& [o, e] : *pipes) {
      CloseIfOpen(o);
      CloseIfOpen(e);
      o = e = -1;
    }
    on_exit_ = nullptr;  // the caller learns of the failure from the Status
    for (Worker& w : workers_) ::killpg(w.pid, SIGKILL);
  }
  return s;
}

Status WorkerSet::Fork(const WorkerSpec& spec, pid_t self, std::pair<int, int>* pipe,
                       std::vector<int>* status_fds) {
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_fd = -1, out_read = -1, err_fd = -1, err_read = -1;
  Status s = OpenTarget(spec.out, &out_fd, &out_read);
  if (s.ok()) s = OpenTarget(spec.err, &err_fd, &err_read);
  int status_pipe[2] = {-1, -1};
  if (s.ok() && ::pipe2(status_pipe, O_CLOEXEC) != 0) {
    s = Status::IOError("pipe: " + Errno(errno));
  }
  const PreparedBinding binding(spec.binding);
  pid_t pid = -1;
  if (s.ok()) {
    pid = VforkExec(self, argv.data(), envp.data(), out_fd, err_fd, status_pipe[1],
                    reset_signals_, binding, !spec.stacks_file.empty(),
                    child_nofile_ ? &*child_nofile_ : nullptr);
    if (pid < 0) s = Status::IOError("vfork: " + Errno(errno));
  }
  CloseIfOpen(status_pipe[1]);
  CloseIfOpen(out_fd);
  CloseIfOpen(err_fd);
  *pipe = {out_read, err_read};
  if (pid > 0) {
    const size_t index = workers_.size();
    workers_.push_back(Worker{spec.local_rank, pid, spec.stacks_file, spec.stacks_timeout});
    reaper_.Register(pid, [this, index](pid_t, int st, int64_t rss) { HandleExit(index, st, rss); });
    if (guard_) guard_->Watch(pid);
    status_fds->push_back(status_pipe[0]);
  } else {
    CloseIfOpen(status_pipe[0]);
  }
  return s;
}

void WorkerSet::HandleExit(size_t index, int wait_status, int64_t max_rss_kib) {
  Worker& w = workers_[index];
  w.reaped = true;
  // Its leftovers may have missed the close's signal (Close): again, once.
  if (closing_ && !killed_ && close_signal_ != 0 && GroupAlive(w)) ::killpg(w.pid, close_signal_);
  WorkerExit exit{w.local_rank, w.pid, ExitCodeFromWaitStatus(wait_status),
                  static_cast<int64_t>(std::time(nullptr)), max_rss_kib};
  if (on_exit_) on_exit_(exit);
  CheckClosed();
}

bool WorkerSet::GroupAlive(Worker& w) {
  if (w.group_empty) return false;
  if (::kill(-w.pid, 0) != 0 && errno == ESRCH) {
    w.group_empty = true;
    if (guard_) guard_->Unwatch(w.pid);
    return false;
  }
  return true;
}

void WorkerSet::Signal(int sig) {
  for (Worker& w : workers_) {
    if (GroupAlive(w)) ::killpg(w.pid, sig);
  }
}

void WorkerSet::Close(int sig, Duration grace, Duration kill_timeout, CloseHandler done) {
  if (closing_) {
    Kill();
    if (done) close_done_ = std::move(done);
    return;
  }
  closing_ = true;
  killed_ = false;
  close_signal_ = 0;
  kill_timeout_ = kill_timeout;
  close_done_ = std::move(done);
  if (sig == SIGKILL) {
    Kill();
  } else if (dump_) {
    // The stacks first: no worker is signalled while a hung one is read.
    after_dump_ = [this, sig, grace] { SignalAndWait(sig, grace); };
  } else {
    SignalAndWait(sig, grace);
  }
  reaper_.OnAnyExit([this] { CheckClosed(); });
  boost::asio::post(io_, [this] { CheckClosed(); });
}

void WorkerSet::SignalAndWait(int sig, Duration grace) {
  if (!closing_ || killed_) return;
  close_signal_ = sig;
  Signal(sig);
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !closing_) return;
    spdlog::warn("workers still running after the shutdown grace; sending SIGKILL");
    std::vector<size_t> all(workers_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    SaveStacksOf(all, "it was still running after the shutdown grace", [this] {
      if (closing_) Kill();
    });
  });
}

void WorkerSet::CutSaveShort() {
  if (dump_) dump_->Cancel();  // its `then` runs, posted
}

void WorkerSet::Kill() {
  CutSaveShort();
  Signal(SIGKILL);
  if (killed_) return;
  killed_ = true;
  kill_timer_.cancel();
  stuck_timer_.expires_after(kill_timeout_);
  stuck_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !closing_) return;
    GiveUp();
  });
}

// SIGKILL cannot end a process in uninterruptible sleep, nor make a parent
// outside the group reap its zombie: waiting on for ever would hang ctrun.
void WorkerSet::GiveUp() {
  std::vector<StuckProcess> stuck = Stuck();
  if (stuck.empty()) {  // all gone since the last check, not reaped yet
    CheckClosed();
    if (!closing_) return;
  }
  on_exit_ = nullptr;  // later exits of this group are not reported
  EndClose(stuck);
}

std::vector<StuckProcess> WorkerSet::Stuck() {
  std::vector<StuckProcess> out;
  for (Worker& w : workers_) {
    if (!w.reaped) {
      std::optional<ProcStat> st = ReadProcStat(w.pid);
      out.push_back(StuckProcess{w.local_rank, w.pid, true, st ? st->comm : "",
                                 st ? DescribeState(st->state) : "unknown"});
    }
    if (!GroupAlive(w)) continue;
    for (const ProcStat& m : ProcessGroupMembers(w.pid)) {
      if (m.pid == w.pid && !w.reaped) continue;  // listed above
      out.push_back(StuckProcess{w.local_rank, m.pid, m.pid == w.pid, m.comm, DescribeState(m.state)});
    }
  }
  return out;
}

void WorkerSet::CheckClosed() {
  if (!closing_) return;
  for (Worker& w : workers_) {
    if (!w.reaped || GroupAlive(w)) return;
  }
  EndClose({});
}

void WorkerSet::EndClose(const std::vector<StuckProcess>& stuck) {
  closing_ = false;
  kill_timer_.cancel();
  stuck_timer_.cancel();
  reaper_.OnAnyExit(nullptr);
  if (close_done_) {
    CloseHandler done = std::move(close_done_);
    close_done_ = nullptr;
    done(stuck);
  }
}

void WorkerSet::SaveStacks(int local_rank, const std::string& why) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].local_rank == local_rank) SaveStacksOf({i}, why, nullptr);
  }
}

void WorkerSet::SaveStacksOf(const std::vector<size_t>& indices, const std::string& why,
                             std::function<void()> then) {
  std::vector<StackDumpTarget> targets;
  Duration timeout{};
  if (!dump_) {
    for (size_t i : indices) {
      Worker& w = workers_[i];
      if (w.stacks_file.empty() || w.stacks_saved || w.reaped) continue;
      std::optional<ProcStat> st = ReadProcStat(w.pid);
      if (!st || st->state == 'Z' || st->state == 'X') continue;  // exited, not reaped yet
      w.stacks_saved = true;
      targets.push_back(StackDumpTarget{w.local_rank, w.pid, w.stacks_file, why});
      timeout = std::max(timeout, w.stacks_timeout);
    }
  }
  if (targets.empty()) {
    if (then) boost::asio::post(io_, std::move(then));
    return;
  }
  after_dump_ = std::move(then);
  dump_ = StackDump::Create(io_);
  dump_->Start(std::move(targets), timeout,
               [this](const std::vector<StackDumpTarget>& saved, const std::vector<Status>& statuses) {
                 for (size_t i = 0; i < saved.size(); ++i) {
                   const StackDumpTarget& t = saved[i];
                   if (statuses[i].ok()) {
                     spdlog::warn("saved the stacks of worker local_rank {} (pid {}) to {}", t.local_rank, t.pid,
                                  t.path);
                   } else {
                     spdlog::warn("cannot save the stacks of worker local_rank {} (pid {}): {}; killing it anyway",
                                  t.local_rank, t.pid, statuses[i].message());
                   }
                 }
                 dump_.reset();
                 if (after_dump_) {
                   std::function<void()> next = std::move(after_dump_);
                   after_dump_ = nullptr;
                   next();
                 }
               });
}

std::vector<pid_t> WorkerSet::Pids() const {
  std::vector<pid_t> pids;
  for (const Worker& w : workers_) pids.push_back(w.pid);
  return pids;
}

}  // namespace ctrun::launcher
