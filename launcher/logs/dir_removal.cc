#include "launcher/logs/dir_removal.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

namespace ctrun::launcher {

namespace {

// Enough to overlap the waits of a node's worth of ranks; beyond it each
// thread closes a share in turn.
constexpr size_t kMaxThreads = 16;

// An open descriptor on the regular file `name` in `dfd`, or -1 (then its
// blocks are freed by the unlink itself). Never opens anything else: opening
// a device or a FIFO can have effects of its own.
int OpenRegular(int dfd, const char* name, unsigned char d_type) {
  if (d_type != DT_REG && d_type != DT_UNKNOWN) return -1;
  const int fd = ::openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (d_type == DT_UNKNOWN && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Unlinks the entries of `dir` that are not directories, keeping a
// descriptor on each regular file in `fds`.
void UnlinkFiles(const std::string& dir, std::vector<int>& fds) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return;
  DIR* d = ::fdopendir(dfd);
  if (d == nullptr) {
    ::close(dfd);
    return;
  }
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (e->d_type == DT_DIR) continue;  // not followed: the caller's full walk takes it
    const int fd = OpenRegular(dfd, e->d_name, e->d_type);
    if (::unlinkat(dfd, e->d_name, 0) == 0 && fd >= 0) {
      fds.push_back(fd);
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  ::closedir(d);  // closes dfd
}

// Hands `fds` to the kernel: registered with a new io_uring instance, which
// is closed at once, so the kernel puts them from its own worker. Closes
// `fds` and returns true on success; leaves them open and returns false when
// io_uring is not to be had.
bool HandToKernel(const std::vector<int>& fds) {
  io_uring_params params;
  std::memset(&params, 0, sizeof params);
  const long ring = ::syscall(SYS_io_uring_setup, 1, &params);
  if (ring < 0) return false;
  const long registered = ::syscall(SYS_io_uring_register, static_cast<int>(ring),
                                    IORING_REGISTER_FILES, fds.data(),
                                    static_cast<unsigned>(fds.size()));
  if (registered < 0) {
    ::close(static_cast<int>(ring));
    return false;
  }
  for (int fd : fds) ::close(fd);
  ::close(static_cast<int>(ring));
  return true;
}

}  // namespace

size_t DirRemoval::ThreadsFor(size_t descriptors, bool may_wait, size_t max_threads) {
  if (!may_wait || descriptors <= 1) return 0;
  return std::min(descriptors, max_threads);
}

bool DirRemoval::MayWait(long f_type) {
  return f_type != static_cast<long>(TMPFS_MAGIC) && f_type != static_cast<long>(RAMFS_MAGIC);
}

bool DirRemoval::Remove(const std::vector<std::string>& dirs) {
  std::vector<int> fds;
  fds.reserve(dirs.size());
  bool removed = true;
  bool may_wait = true;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const char* path = dirs[i].c_str();
    const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      removed = false;
      break;
    }
    if (i == 0) {
      struct statfs st;
      if (::fstatfs(fd, &st) == 0) may_wait = MayWait(static_cast<long>(st.f_type));
    }
    bool gone = ::rmdir(path) == 0;
    if (!gone && (errno == ENOTEMPTY || errno == EEXIST)) {
      UnlinkFiles(dirs[i], fds);
      gone = ::rmdir(path) == 0;
    }
    if (!gone) {
      ::close(fd);
      removed = false;
      break;
    }
    fds.push_back(fd);
  }
  if (!may_wait || fds.size() <= 1) {
    for (int fd : fds) ::close(fd);
  } else if (release_ != Release::kKernel || !HandToKernel(fds)) {
    CloseOnThreads(fds);
  }
  return removed;
}

void DirRemoval::CloseOnThreads(const std::vector<int>& fds) {
  const size_t threads = ThreadsFor(fds.size(), true, kMaxThreads);
  std::vector<std::vector<int>> shares(std::max<size_t>(threads, 1));
  for (size_t i = 0; i < fds.size(); ++i) shares[i % shares.size()].push_back(fds[i]);
  for (std::vector<int>& share : shares) {
    try {
      threads_.emplace_back([share] {  // a copy: `share` stays whole should this throw
        for (int fd : share) ::close(fd);
      });
    } catch (const std::exception&) {  // no thread to be had: close them here
      for (int fd : share) ::close(fd);
    }
  }
}

void DirRemoval::Wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace ctrun::launcher
