#include "launcher/process/orphan_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace ctrun::launcher {

namespace {

// One message: an op ('+' watch, '-' unwatch, '0' forget all) and a pgid.
// Five bytes, so each write is atomic on a pipe.
constexpr size_t kMessageSize = 1 + sizeof(pid_t);

// ---------------------------------------------------------------------------
// The guard's side. It runs in a child made with clone(CLONE_VM): it shares
// ctrun's memory (so starting it copies no page tables, and ctrun takes no
// copy-on-write faults afterwards), but not its descriptors or signal
// handlers. Sharing memory means the guard may touch nothing of ctrun's:
// no malloc (another thread of ctrun may hold the heap's lock, or ctrun may
// have died holding it), no errno and nothing else thread-local (the guard
// runs on ctrun's main thread's TLS), no sanitizer runtime. So it makes its
// system calls itself, keeps its state in a region of its own (GuardMemory)
// and parses /proc by hand.
// ---------------------------------------------------------------------------

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kSharedMemoryGuard = true;
#else
constexpr bool kSharedMemoryGuard = false;  // other machines fork the guard
#endif

#define CTRUN_GUARD_CODE __attribute__((no_sanitize("address", "undefined"), noinline))

// A system call without libc: returns the result, or -errno.
CTRUN_GUARD_CODE long Sys(long nr, long a = 0, long b = 0, long c = 0, long d = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
#else
  return ::syscall(nr, a, b, c, d);  // the forked guard: its own errno
#endif
}

// What the guard keeps: the watched groups and its buffers, in memory that
// ctrun mapped for it and never touches while it runs. 65,536 groups at
// once is more workers than one node can start; a group past that is not
// watched (its worker still dies by PDEATHSIG).
constexpr int kMaxGroups = 1 << 16;
struct GuardMemory {
  pid_t groups[kMaxGroups];
  int count;
  char dents[8192];
  char path[64];
  char stat[512];
};
constexpr size_t kGuardStack = 64 * 1024;
constexpr size_t kGuardMapping = kGuardStack + ((sizeof(GuardMemory) + 4095) & ~size_t{4095});

CTRUN_GUARD_CODE void Add(GuardMemory& m, pid_t g) {
  for (int i = 0; i < m.count; ++i) {
    if (m.groups[i] == g) return;
  }
  if (m.count < kMaxGroups) m.groups[m.count++] = g;
}

CTRUN_GUARD_CODE void Remove(GuardMemory& m, pid_t g) {
  for (int i = 0; i < m.count; ++i) {
    if (m.groups[i] == g) {
      m.groups[i] = m.groups[--m.count];
      return;
    }
  }
}

CTRUN_GUARD_CODE bool Watched(const GuardMemory& m, long session) {
  for (int i = 0; i < m.count; ++i) {
    if (m.groups[i] == session) return true;
  }
  return false;
}

// Writes "/proc/<name>/stat" into m.path; false when it does not fit.
CTRUN_GUARD_CODE bool StatPath(GuardMemory& m, const char* name) {
  static constexpr char kPrefix[] = "/proc/";
  static constexpr char kSuffix[] = "/stat";
  size_t n = 0;
  for (const char* p = kPrefix; *p; ++p) m.path[n++] = *p;
  for (const char* p = name; *p; ++p) {
    if (n + sizeof(kSuffix) >= sizeof(m.path)) return false;
    m.path[n++] = *p;
  }
  for (const char* p = kSuffix; *p; ++p) m.path[n++] = *p;
  m.path[n] = '\0';
  return true;
}

// The session id in /proc/<name>/stat, or -1. The fields after the last ')'
// are: state ppid pgrp session ...
CTRUN_GUARD_CODE long SessionOf(GuardMemory& m, const char* name) {
  if (!StatPath(m, name)) return -1;
  long fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(m.path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long n = Sys(SYS_read, fd, reinterpret_cast<long>(m.stat), sizeof(m.stat) - 1);
  Sys(SYS_close, fd);
  if (n <= 0) return -1;
  long paren = -1;
  for (long i = 0; i < n; ++i) {
    if (m.stat[i] == ')') paren = i;
  }
  if (paren < 0) return -1;
  long i = paren + 1;
  for (int field = 0; field < 3; ++field) {  // skip state, ppid, pgrp
    while (i < n && m.stat[i] == ' ') ++i;
    while (i < n && m.stat[i] != ' ') ++i;
  }
  while (i < n && m.stat[i] == ' ') ++i;
  long session = 0;
  bool digits = false;
  while (i < n && m.stat[i] >= '0' && m.stat[i] <= '9') {
    session = session * 10 + (m.stat[i++] - '0');
    digits = true;
  }
  return digits ? session : -1;
}

// SIGKILLs every watched group and every process in those groups' sessions
// (workers are session leaders; a descendant that moved to a process group
// of its own stays in the session). Reading /proc/<pid>/stat of every
// process costs ~10 us each: with many agents on one host (1024 in
// bench/rendezvous.sh) a scan at every agent's exit was the largest CPU cost
// of the whole run. So the scan is made only when some group is still watched.
CTRUN_GUARD_CODE void KillEverything(GuardMemory& m) {
  if (m.count == 0) return;
  for (int i = 0; i < m.count; ++i) Sys(SYS_kill, -m.groups[i], SIGKILL);
  long dir = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  for (;;) {
    long n = Sys(SYS_getdents64, dir, reinterpret_cast<long>(m.dents), sizeof(m.dents));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* e = reinterpret_cast<struct dirent64*>(m.dents + off);
      off += e->d_reclen;
      long pid = 0;
      const char* p = e->d_name;
      for (; *p >= '0' && *p <= '9'; ++p) pid = pid * 10 + (*p - '0');
      if (*p != '\0' || p == e->d_name || pid <= 1) continue;
      if (Watched(m, SessionOf(m, e->d_name))) Sys(SYS_kill, pid, SIGKILL);
    }
  }
  Sys(SYS_close, dir);
}

// Signals 1..64 (the kernel's _NSIG on x86-64 and AArch64).
constexpr int kGuardSignals = 65;

struct GuardStart {
  int fd;
  GuardMemory* memory;
};

CTRUN_GUARD_CODE int GuardMain(void* arg) {
  const GuardStart start = *static_cast<GuardStart*>(arg);
  GuardMemory& m = *start.memory;
  const long fd = start.fd;
  Sys(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>("ctrun-guard"));
  // The terminal's and job control's signals, sent to ctrun's process group.
  // (A kernel sigaction: handler, flags, restorer, mask; SIG_IGN needs no
  // restorer.)
  struct {
    unsigned long handler, flags, restorer, mask;
  } ignore = {reinterpret_cast<unsigned long>(SIG_IGN), 0, 0, 0};
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP, SIGTTIN,
                  SIGTTOU}) {
    Sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&ignore), 0, sizeof(ignore.mask));
  }
  // Any handler of ctrun's (copied at clone) would run on this stack, in
  // ctrun's memory: back to the default. Ignored signals stay ignored.
  decltype(ignore) now = {0, 0, 0, 0};
  const decltype(ignore) dfl = {reinterpret_cast<unsigned long>(SIG_DFL), 0, 0, 0};
  for (int sig = 1; sig < kGuardSignals; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (Sys(SYS_rt_sigaction, sig, 0, reinterpret_cast<long>(&now), sizeof(now.mask)) != 0) continue;
    if (now.handler != reinterpret_cast<unsigned long>(SIG_DFL) &&
        now.handler != reinterpret_cast<unsigned long>(SIG_IGN)) {
      Sys(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, sizeof(dfl.mask));
    }
  }
  // Start blocked every signal until here (a SIGINT to ctrun's process group
  // just after the clone must not kill the guard): one sent meanwhile to an
  // ignored signal was discarded by its SIG_IGN, any other is delivered now.
  const unsigned long long none = 0;  // the kernel's sigset: 64 bits
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof(none));
  // Hold nothing of ctrun's open but the pipe: a reader of ctrun's stdout
  // must see end-of-file when ctrun exits, not when the guard does.
  long null_fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR);
  if (null_fd >= 0) {
    for (long std_fd = 0; std_fd <= 2; ++std_fd) Sys(SYS_dup3, null_fd, std_fd, 0);
  }
  const bool closed = (fd <= 3 || Sys(SYS_close_range, 3, fd - 1, 0) == 0) &&
                      Sys(SYS_close_range, fd + 1, ~0U, 0) == 0;
  for (long other = 3; !closed && other < 1024; ++other) {  // a kernel before 5.9
    if (other != fd) Sys(SYS_close, other);
  }
  m.count = 0;
  char msg[kMessageSize];
  size_t have = 0;
  for (;;) {
    long n = Sys(SYS_read, fd, reinterpret_cast<long>(msg + have), static_cast<long>(kMessageSize - have));
    if (n == -EINTR) continue;
    if (n <= 0) break;  // ctrun is gone, or done
    have += static_cast<size_t>(n);
    if (have < kMessageSize) continue;
    have = 0;
    pid_t pgid;
    __builtin_memcpy(&pgid, msg + 1, sizeof(pgid));
    if (msg[0] == '+') {
      Add(m, pgid);
    } else if (msg[0] == '-') {
      Remove(m, pgid);
    } else {
      m.count = 0;
    }
  }
  KillEverything(m);
  Sys(SYS_exit, 0);  // this task only; never libc's exit (ctrun's atexit handlers)
  return 0;
}

}  // namespace

Result<std::unique_ptr<OrphanGuard>> OrphanGuard::Start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status::IOError(std::string("orphan guard: pipe: ") + std::strerror(errno));
  }
  void* mapping = ::mmap(nullptr, kGuardMapping, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping == MAP_FAILED) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IOError(std::string("orphan guard: mmap: ") + std::strerror(errno));
  }
  // The region: the guard's stack (growing down from its top), then its state.
  auto* base = static_cast<char*>(mapping);
  auto* memory = reinterpret_cast<GuardMemory*>(base + kGuardStack);
  // Stays valid until the child has copied it: it is read before the child's
  // first system call, and the clone below returns only after the child is
  // made, not run, so it lives in the mapping (the child's, until reaped).
  auto* start = reinterpret_cast<GuardStart*>(base + kGuardStack - 64);
  start->fd = fds[0];
  start->memory = memory;
  pid_t pid = -1;
  bool forked = !kSharedMemoryGuard;
  // The guard starts with every signal blocked, and unblocks them once its
  // own dispositions are set (GuardMain): until then a signal would run one
  // of ctrun's handlers in it, or end it (a SIGINT from the terminal).
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  if constexpr (kSharedMemoryGuard) {
    pid = ::clone(GuardMain, base + kGuardStack - 128, CLONE_VM | SIGCHLD, start);
    // A sandbox that refuses a shared-memory child that is not a thread
    // (a seccomp profile, an emulator): the guard is forked, as elsewhere.
    forked = pid < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM);
  }
  if (forked) {
    pid = ::fork();
    if (pid == 0) GuardMain(start);  // its copy of the write end: closed there
  }
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    int err = clone_errno;
    ::close(fds[0]);
    ::close(fds[1]);
    ::munmap(mapping, kGuardMapping);
    return Status::IOError(std::string(forked ? "orphan guard: fork: " : "orphan guard: clone: ") +
                           std::strerror(err));
  }
  // The guard has its own descriptor table, a copy made at clone or fork:
  // its copy of the write end is closed there (close_range keeps only fd).
  ::close(fds[0]);
  return std::unique_ptr<OrphanGuard>(new OrphanGuard(pid, fds[1], mapping));
}

OrphanGuard::~OrphanGuard() {
  Stop();
  // The guard is reaped (or was never ours to wait for: ECHILD), so nothing
  // runs on its stack any more.
  if (mapping_) ::munmap(mapping_, kGuardMapping);
}

void OrphanGuard::Stop() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (reaped_) return;
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;  // or ECHILD: someone else reaped it; either way it is gone
}

void OrphanGuard::Send(char op, pid_t pgid) {
  if (fd_ < 0) return;
  char msg[kMessageSize];
  msg[0] = op;
  std::memcpy(msg + 1, &pgid, sizeof(pgid));
  ssize_t n;
  do {
    n = ::write(fd_, msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
}

// Every process ctrun started, and every descendant of one, is below ctrun
// (a child subreaper) until ctrun exits: so now ctrun's children are the
// guard and the leftovers, worker descendants re-parented to ctrun. Children
// are listed per thread (/proc/self/task/*/children). Any doubt (not a
// subreaper, a file that cannot be read) keeps what is watched as it is.
void OrphanGuard::HandOverAtExit() {
  int subreaper = 0;
  if (::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) != 0 || !subreaper) return;
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return;
  std::set<pid_t> leftovers;
  bool complete = true;
  while (dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    char path[300];
    std::snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
    FILE* f = std::fopen(path, "r");
    if (!f) {
      complete = false;
      break;
    }
    long child;
    while (std::fscanf(f, "%ld", &child) == 1) {
      if (child != pid_) leftovers.insert(static_cast<pid_t>(child));
    }
    std::fclose(f);
  }
  ::closedir(tasks);
  if (!complete) return;
  if (leftovers.empty()) {
    Send('0', 0);
    return;
  }
  const pid_t own_session = ::getsid(0);
  for (pid_t p : leftovers) {
    const pid_t sid = ::getsid(p);
    if (sid > 1 && sid != own_session) Watch(sid);
  }
}

void OrphanGuard::Watch(pid_t pgid) { Send('+', pgid); }
void OrphanGuard::Unwatch(pid_t pgid) { Send('-', pgid); }

}  // namespace ctrun::launcher
