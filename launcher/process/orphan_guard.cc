#include "launcher/process/orphan_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace ctrun::launcher {

namespace {

// One message: an op ('+' watch, '-' unwatch, '0' forget all) and a pgid.
// Five bytes, so each write is atomic on a pipe.
constexpr size_t kMessageSize = 1 + sizeof(pid_t);

// The session id of /proc/<pid>, or -1.
pid_t SessionOf(const char* pid_dir) {
  char path[300];
  std::snprintf(path, sizeof(path), "/proc/%s/stat", pid_dir);
  FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the last ')': state ppid pgrp session ...
  const char* p = std::strrchr(buf, ')');
  if (!p) return -1;
  char state;
  int ppid, pgrp, session;
  if (std::sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) return -1;
  return session;
}

// Reading /proc/<pid>/stat of every process costs ~10 us each: with many
// agents on one host (1024 in bench/rendezvous.sh) a scan at every agent's
// exit made the guards the largest CPU cost of the whole run. So the scan is
// made only when some group is still watched.
void KillEverything(const std::set<pid_t>& groups) {
  if (groups.empty()) return;
  for (pid_t g : groups) ::killpg(g, SIGKILL);
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (dirent* e = ::readdir(proc)) {
    char* end;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 1) continue;
    if (groups.count(SessionOf(e->d_name))) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  ::closedir(proc);
}

[[noreturn]] void GuardMain(int fd) {
  ::prctl(PR_SET_NAME, "ctrun-guard");
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP,
                  SIGTTIN, SIGTTOU}) {
    ::signal(sig, SIG_IGN);
  }
  // Hold nothing of ctrun's open but the pipe: a reader of ctrun's stdout
  // must see end-of-file when ctrun exits, not when the guard does.
  int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    for (int std_fd = 0; std_fd <= 2; ++std_fd) ::dup2(null_fd, std_fd);
  }
  const bool closed = (fd <= 3 || ::close_range(3, static_cast<unsigned>(fd) - 1, 0) == 0) &&
                      ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0) == 0;
  for (int other = 3; !closed && other < 1024; ++other) {  // a kernel before 5.9
    if (other != fd) ::close(other);
  }
  std::set<pid_t> groups;
  char msg[kMessageSize];
  size_t have = 0;
  for (;;) {
    ssize_t n = ::read(fd, msg + have, kMessageSize - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // ctrun is gone
    have += static_cast<size_t>(n);
    if (have < kMessageSize) continue;
    have = 0;
    pid_t pgid;
    std::memcpy(&pgid, msg + 1, sizeof(pgid));
    if (msg[0] == '+') {
      groups.insert(pgid);
    } else if (msg[0] == '-') {
      groups.erase(pgid);
    } else {
      groups.clear();
    }
  }
  KillEverything(groups);
  ::_exit(0);
}

}  // namespace

Result<std::unique_ptr<OrphanGuard>> OrphanGuard::Start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status::IOError(std::string("orphan guard: pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IOError(std::string("orphan guard: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[1]);
    GuardMain(fds[0]);
  }
  ::close(fds[0]);
  return std::unique_ptr<OrphanGuard>(new OrphanGuard(pid, fds[1]));
}

OrphanGuard::~OrphanGuard() { Stop(); }

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
