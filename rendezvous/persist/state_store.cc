#include "rendezvous/persist/state_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace ctrun::rdzv {

namespace {

constexpr char kSuffix[] = ".run";

std::string Reason() { return std::strerror(errno); }

std::string Encode(const std::string& run_id) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : run_id) {
    if (std::isalnum(c) || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Status WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError(Reason());
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<std::string> ReadAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("state file " + path + ": cannot read it: " + Reason());
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::IOError("state file " + path + ": cannot read it: " + Reason());
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<StateStore> StateStore::Open(const std::string& dir) {
  if (dir.empty()) return Status::IOError("--state-dir '': give a directory to keep the rendezvous state in");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IOError("--state-dir '" + dir + "': cannot create it: " + Reason());
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::IOError("--state-dir '" + dir + "': not a directory (give a directory ctrund may write to)");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::IOError("--state-dir '" + dir + "': not writable: " + Reason());
  }
  return StateStore(dir);
}

std::string StateStore::PathOf(const std::string& run_id) const { return dir_ + "/" + Encode(run_id) + kSuffix; }

Status StateStore::Save(const StoredRun& run, ClockPair now) const {
  const std::string path = PathOf(run.run_id);
  const std::string tmp = dir_ + "/." + Encode(run.run_id) + ".tmp";
  const std::string bytes = EncodeRunState(run, now);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError("state file " + tmp + ": cannot create it: " + Reason());
  Status s = WriteAll(fd, bytes);
  if (s.ok() && ::fsync(fd) != 0) s = Status::IOError(Reason());
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Status::IOError(Reason());
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return Status::IOError("state file " + path + ": cannot write it: " + s.message());
  }
  // The rename itself is durable only once the directory is synced.
  if (int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status StateStore::Remove(const std::string& run_id) const {
  const std::string path = PathOf(run_id);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::IOError("state file " + path + ": cannot remove it: " + Reason());
  }
  if (int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Result<std::vector<StoredRun>> StateStore::LoadAll(ClockPair now) const {
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return Status::IOError("--state-dir '" + dir_ + "': cannot list it: " + Reason());
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.front() != '.' && EndsWith(name, kSuffix)) names.push_back(std::move(name));
  }
  ::closedir(d);
  std::vector<StoredRun> runs;
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    Result<std::string> bytes = ReadAll(path);
    if (!bytes.ok()) return bytes.status();
    Result<StoredRun> run = DecodeRunState(*bytes, now);
    if (!run.ok()) {
      return Status::InvalidArgument("state file " + path + ": " + run.status().message() +
                                     " (move it out of --state-dir to start without it)");
    }
    if (PathOf(run->run_id) != path) {
      return Status::InvalidArgument("state file " + path + ": holds run '" + run->run_id +
                                     "', not the run its name says (move it out of --state-dir)");
    }
    runs.push_back(std::move(*run));
  }
  std::sort(runs.begin(), runs.end(), [](const StoredRun& a, const StoredRun& b) { return a.run_id < b.run_id; });
  return runs;
}

}  // namespace ctrun::rdzv
