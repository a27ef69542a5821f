// report/reader/follow_source.cpp — see follow_source.h.
#include "report/reader/follow_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "util/ends_with.h"

namespace gpumemtrace::report {
namespace {

class FollowSource : public ByteSource {
 public:
  FollowSource(const std::string& path, FollowControl& control) : path_(path), control_(control) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd_ < 0 || fstat(fd_, &st) != 0) throw std::runtime_error("cannot open: " + std::string(std::strerror(errno)));
    ino_ = st.st_ino;
    dev_ = st.st_dev;
  }
  ~FollowSource() override { ::close(fd_); }
  FollowSource(const FollowSource&) = delete;
  FollowSource& operator=(const FollowSource&) = delete;

  size_t read(char* out, size_t capacity) override {
    for (int idle_ms = 0;;) {
      if (cancelled_.load(std::memory_order_acquire) || control_.stop_now()) return 0;
      const ssize_t n = ::pread(fd_, out, capacity, static_cast<off_t>(offset_));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error("read error: " + std::string(std::strerror(errno)));
      if (n > 0) {
        offset_ += static_cast<uint64_t>(n);
        caught_up_ = static_cast<size_t>(n) < capacity;  // a short read: the end, for now
        return static_cast<size_t>(n);
      }
      caught_up_ = true;
      if (cancelled_.load(std::memory_order_acquire) || !control_.keep_waiting()) return 0;
      timespec pause{0, kFollowPollMs * 1000000L};
      nanosleep(&pause, nullptr);
      if ((idle_ms += kFollowPollMs) % kFollowReopenMs == 0) reopen();
    }
  }
  uint64_t consumed() const override { return offset_; }
  bool caught_up() const override { return caught_up_; }
  void cancel() override { cancelled_.store(true, std::memory_order_release); }

  // Whether the first bytes are zstd's magic number, waiting for them (false when the input ended
  // first: the plain reader then says what it is).
  bool starts_like_zstd() {
    char head[4];
    size_t have = 0;
    while (have < sizeof head) {
      const ssize_t n = ::pread(fd_, head + have, sizeof head - have, static_cast<off_t>(have));
      if (n > 0) {
        have += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || control_.stop_now() || !control_.keep_waiting()) return false;
      timespec pause{0, kFollowPollMs * 1000000L};
      nanosleep(&pause, nullptr);
    }
    return report::starts_like_zstd(std::string_view(head, have));
  }

 private:
  // A fresh descriptor for the same file (NFS: close-to-open consistency); the old one stays when
  // the path now names another file, or none.
  void reopen() {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == ino_ && st.st_dev == dev_) {
      ::close(fd_);
      fd_ = fd;
    } else if (fd >= 0) {
      ::close(fd);
    }
  }

  std::string path_;
  FollowControl& control_;
  int fd_ = -1;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
  uint64_t offset_ = 0;
  bool caught_up_ = false;
  std::atomic<bool> cancelled_{false};  // set from another thread (cancel())
};

}  // namespace

std::unique_ptr<ByteSource> follow_byte_source(const std::string& path, FollowControl& control) {
  auto file = std::make_unique<FollowSource>(path, control);
  if (util::ends_with(path, ".zst") || file->starts_like_zstd()) return zstd_byte_source(std::move(file));
  return file;
}

}  // namespace gpumemtrace::report
