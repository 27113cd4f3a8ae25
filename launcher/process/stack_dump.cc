#include "launcher/process/stack_dump.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "launcher/process/stack_text.h"

extern char** environ;

namespace ctrun::launcher {

namespace {

// A C string literal for gdb's expression parser.
std::string GdbString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One gdb at work on one target.
struct Dump {
  pid_t gdb = -1;
  int pidfd = -1;
  bool done = false;
  Status status;
  std::string python_file;
  std::string gdb_file;
};

Status Spawn(const StackDumpTarget& t, Dump* d) {
  const int created = ::open(d->python_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (created < 0) {
    return Status::IOError("cannot write " + d->python_file + ": " + std::strerror(errno));
  }
  ::close(created);
  const std::vector<std::string> args = GdbArgv(t.pid, d->python_file);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, d->gdb_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: killed whole when late
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const int err = ::posix_spawnp(&d->gdb, "gdb", &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    d->gdb = -1;
    if (err == ENOENT) {
      return Status::NotFound("gdb is not on PATH (install it, e.g. apt-get install gdb, or turn "
                              "this off with --hang-stacks-timeout 0)");
    }
    return Status::IOError(std::string("cannot start gdb: ") + std::strerror(err));
  }
  d->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, d->gdb, 0));
  return Status::Ok();
}

// Reaps the gdbs that have ended; true when none is left running.
bool ReapFinished(std::vector<Dump>& dumps) {
  bool all = true;
  for (Dump& d : dumps) {
    if (d.gdb < 0 || d.done) continue;
    int st = 0;
    if (::waitpid(d.gdb, &st, WNOHANG) == d.gdb) {
      d.done = true;
    } else {
      all = false;
    }
  }
  return all;
}

void WaitAll(std::vector<Dump>& dumps, Duration timeout) {
  const TimePoint deadline = Clock::now() + timeout;
  while (!ReapFinished(dumps)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return;
    std::vector<pollfd> fds;
    bool polling = true;
    for (const Dump& d : dumps) {
      if (d.gdb < 0 || d.done) continue;
      if (d.pidfd < 0) polling = false;  // no pidfd (old kernel): look again soon
      fds.push_back(pollfd{d.pidfd, POLLIN, 0});
    }
    const int wait_ms = polling ? static_cast<int>(left.count()) : std::min<int>(20, left.count());
    ::poll(polling ? fds.data() : nullptr, polling ? fds.size() : 0, wait_ms);
  }
}

// A line of gdb's output that says it could not attach ("ptrace: ...",
// "Could not attach to process ..."), or "".
std::string AttachError(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ptrace: ", 0) == 0 || line.rfind("Could not attach", 0) == 0) return line;
  }
  return "";
}

}  // namespace

std::vector<std::string> GdbArgv(pid_t pid, const std::string& python_file) {
  // Two phases. First the Python frames, with the symbols of libc and
  // libpython only (a CPython binary has its own): ~2 s even for a worker
  // that loaded torch. Then every library's symbols (libtorch's alone take
  // gdb seconds) and the native stacks. When the timeout cuts the second
  // phase, the Python frames are already in the file.
  return {"gdb", "-nx", "-batch",
          "-iex", "set auto-load off",
          "-iex", "set debuginfod enabled off",
          "-iex", "set auto-solib-add off",
          "-p", std::to_string(pid),
          "-ex", "set print frame-arguments none",
          "-ex", "sharedlibrary libc\\.so",
          "-ex", "sharedlibrary libpython",
          "-ex", "set $ctrun_fd = (int)open(" + GdbString(python_file) + ", 1025)",  // O_WRONLY|O_APPEND
          "-ex", "call (void)_Py_DumpTracebackThreads($ctrun_fd, 0, 0)",
          "-ex", "call (void)close($ctrun_fd)",
          "-ex", "sharedlibrary",
          "-ex", "thread apply all bt"};
}

std::vector<Status> SaveStacksWithGdb(const std::vector<StackDumpTarget>& targets, Duration timeout) {
  std::vector<Dump> dumps(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    dumps[i].python_file = targets[i].path + ".python.tmp";
    dumps[i].gdb_file = targets[i].path + ".gdb.tmp";
    dumps[i].status = Spawn(targets[i], &dumps[i]);
  }
  WaitAll(dumps, timeout);
  std::vector<Status> out;
  for (size_t i = 0; i < targets.size(); ++i) {
    Dump& d = dumps[i];
    const StackDumpTarget& t = targets[i];
    if (d.gdb > 0 && !d.done) {
      ::killpg(d.gdb, SIGKILL);
      int st = 0;
      while (::waitpid(d.gdb, &st, 0) < 0 && errno == EINTR) {
      }
      ::kill(t.pid, SIGCONT);  // a gdb killed mid-attach may leave it stopped
      d.status = Status::DeadlineExceeded(
          fmt::format("gdb did not finish within {:g} s (--hang-stacks-timeout); the file has what "
                      "it printed by then",
                      std::chrono::duration<double>(timeout).count()));
    }
    if (d.pidfd >= 0) ::close(d.pidfd);
    if (d.gdb > 0) {
      const std::string gdb_out = ReadWhole(d.gdb_file);
      const std::string python = ReadWhole(d.python_file);
      if (d.status.ok()) {
        const std::string refused = AttachError(gdb_out);
        if (!refused.empty()) d.status = Status::FailedPrecondition("gdb could not attach: " + refused);
      }
      const std::string header = "ctrun: stacks of worker local_rank " + std::to_string(t.local_rank) +
                                 " (pid " + std::to_string(t.pid) + "), saved before it was killed: " +
                                 t.why;
      std::ofstream f(t.path, std::ios::binary | std::ios::trunc);
      f << ComposeStacks(header, python, gdb_out);
      f.close();
      if (!f && d.status.ok()) d.status = Status::IOError("cannot write " + t.path);
    }
    ::unlink(d.python_file.c_str());
    ::unlink(d.gdb_file.c_str());
    out.push_back(d.status);
  }
  return out;
}

}  // namespace ctrun::launcher
