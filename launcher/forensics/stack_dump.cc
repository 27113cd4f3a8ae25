#include "launcher/forensics/stack_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "launcher/forensics/python_stacks.h"
#include "launcher/forensics/stack_text.h"

extern char** environ;

namespace ctrun::launcher {

namespace {

// gdb's output kept in the file at most: a worker with thousands of threads
// still gives a bounded file.
constexpr size_t kMaxGdbOutput = 4u << 20;

std::string ReadHead(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.size() == max) out += "\n... (gdb's output cut at " + std::to_string(max) + " bytes)\n";
  return out;
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

// The Python section of the file: the frames, a line saying why there are
// none, or "" for a process with no CPython (a native worker).
std::string PythonSection(pid_t pid) {
  Result<PythonStacks> stacks = ReadPythonStacks(pid);
  if (stacks.ok()) return FormatPythonStacks(*stacks);
  if (stacks.status().code() == Status::Code::kNotFound) return "";
  return "(cannot read the Python frames: " + stacks.status().message() + ")\n";
}

}  // namespace

struct StackDump::Gdb {
  explicit Gdb(boost::asio::io_context& io) : pidfd(io) {}
  pid_t pid = -1;
  boost::asio::posix::stream_descriptor pidfd;
  bool exited = false;
  Status status;
  std::string python;
  std::string output_file;
};

std::vector<std::string> GdbArgv(pid_t pid) {
  // Every library's symbols (libtorch's alone take gdb seconds), then the
  // native stacks. No `call`: gdb only reads.
  return {"gdb", "-nx", "-batch",
          "-iex", "set auto-load off",
          "-iex", "set debuginfod enabled off",
          "-p", std::to_string(pid),
          "-ex", "set print frame-arguments none",
          "-ex", "thread apply all bt"};
}

std::shared_ptr<StackDump> StackDump::Create(boost::asio::io_context& io) {
  return std::shared_ptr<StackDump>(new StackDump(io));
}

StackDump::StackDump(boost::asio::io_context& io) : io_(io), deadline_(io) {}

StackDump::~StackDump() {
  for (const std::unique_ptr<Gdb>& g : gdbs_) {
    if (g->pid > 0 && !g->exited) ::killpg(g->pid, SIGKILL);
    ::unlink(g->output_file.c_str());
  }
}

void StackDump::Start(std::vector<StackDumpTarget> targets, Duration timeout, Done done) {
  targets_ = std::move(targets);
  timeout_ = timeout;
  done_ = std::move(done);
  for (size_t i = 0; i < targets_.size(); ++i) {
    gdbs_.push_back(std::make_unique<Gdb>(io_));
    gdbs_[i]->python = PythonSection(targets_[i].pid);  // before gdb stops it
  }
  for (size_t i = 0; i < targets_.size(); ++i) Spawn(i);
  deadline_.expires_after(timeout);
  deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->Finish(/*timed_out=*/true);
  });
  for (size_t i = 0; i < targets_.size(); ++i) Watch(i);
}

void StackDump::Spawn(size_t i) {
  Gdb& g = *gdbs_[i];
  g.output_file = targets_[i].path + ".gdb.tmp";
  const std::vector<std::string> args = GdbArgv(targets_[i].pid);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, g.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
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
  const int err = ::posix_spawnp(&g.pid, "gdb", &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    g.pid = -1;
    g.exited = true;
    g.status = err == ENOENT ? Status::NotFound("gdb is not on PATH, so the native frames are missing (install it, "
                                                "e.g. apt-get install gdb)")
                             : Status::IOError(std::string("cannot start gdb: ") + std::strerror(err));
  }
}

void StackDump::Watch(size_t i) {
  Gdb& g = *gdbs_[i];
  if (g.exited) {
    boost::asio::post(io_, [self = shared_from_this(), i] { self->OnGdbExited(i); });
    return;
  }
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, g.pid, 0));
  if (fd < 0) return;  // no pidfd (a kernel before 5.3): waited for until the timeout
  g.pidfd.assign(fd);
  g.pidfd.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this(), i](const boost::system::error_code& ec) {
                       if (!ec) self->OnGdbExited(i);
                     });
}

void StackDump::OnGdbExited(size_t i) {
  Gdb& g = *gdbs_[i];
  if (g.pid > 0 && g.pidfd.is_open()) {
    // Reap it unless ctrun's Reaper already has (waitid on the pidfd cannot
    // reap another process that took its pid since).
    siginfo_t info{};
    ::waitid(static_cast<idtype_t>(3) /* P_PIDFD */, static_cast<id_t>(g.pidfd.native_handle()), &info,
             WEXITED | WNOHANG);
    g.pidfd.close();
  }
  g.exited = true;
  if (finished_) return;
  for (const std::unique_ptr<Gdb>& other : gdbs_) {
    if (!other->exited) return;
  }
  Finish(/*timed_out=*/false);
}

void StackDump::Cancel() {
  if (!finished_) Finish(/*timed_out=*/true);
}

void StackDump::Abandon() {
  done_ = nullptr;
  Cancel();
}

void StackDump::Finish(bool timed_out) {
  if (finished_) return;
  finished_ = true;
  deadline_.cancel();
  std::vector<Status> statuses;
  for (size_t i = 0; i < targets_.size(); ++i) {
    Gdb& g = *gdbs_[i];
    const StackDumpTarget& t = targets_[i];
    if (timed_out && !g.exited && g.pid > 0) {
      ::killpg(g.pid, SIGKILL);  // reaped when its pidfd says so
      ::kill(t.pid, SIGCONT);    // a gdb killed mid-attach may leave it stopped
      g.status = Status::DeadlineExceeded(
          fmt::format("gdb did not finish within {:g} s (--hang-stacks-timeout); the file has what "
                      "it printed by then",
                      std::chrono::duration<double>(timeout_).count()));
    }
    const std::string gdb_out = g.pid > 0 ? ReadHead(g.output_file, kMaxGdbOutput) : g.status.message() + "\n";
    if (g.status.ok()) {
      const std::string refused = AttachError(gdb_out);
      if (!refused.empty()) g.status = Status::FailedPrecondition("gdb could not attach: " + refused);
    }
    const std::string header = "ctrun: stacks of worker local_rank " + std::to_string(t.local_rank) + " (pid " +
                               std::to_string(t.pid) + "), saved before it was killed: " + t.why;
    std::ofstream f(t.path, std::ios::binary | std::ios::trunc);
    f << ComposeStacks(header, g.python, gdb_out);
    f.close();
    if (!f && g.status.ok()) g.status = Status::IOError("cannot write " + t.path);
    if (g.pid > 0) ::unlink(g.output_file.c_str());
    statuses.push_back(g.status);
  }
  if (done_) {
    boost::asio::post(io_, [self = shared_from_this(), statuses = std::move(statuses)] {
      if (!self->done_) return;  // abandoned since
      Done done = std::move(self->done_);
      self->done_ = nullptr;
      done(self->targets_, statuses);
    });
  }
}

}  // namespace ctrun::launcher
