// interpose/writer/sink.cpp
#include "interpose/writer/sink.h"

#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpumemtrace {
namespace {

// Writes all bytes, retrying on EINTR and short writes (a signal must not cut the trace short).
bool write_all(int fd, const char* data, size_t size, std::string* error) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = strerror(errno);
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

class FdSink : public Sink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  bool write(const char* data, size_t size) override { return write_all(fd_, data, size, &error_); }
  bool flush() override { return true; }  // no user-space buffer here: the writer buffers
  bool finish() override { return true; }

 private:
  int fd_;
};

class ZstdSink : public Sink {
 public:
  explicit ZstdSink(int fd) : fd_(fd), out_(ZSTD_CStreamOutSize()) {
    cctx_ = ZSTD_createCCtx();
    if (cctx_) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 3);
    // A checksum of the frame's content: the reader detects corruption instead of reading changed totals.
    if (cctx_) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
  }
  ~ZstdSink() override { ZSTD_freeCCtx(cctx_); }
  bool write(const char* data, size_t size) override { return pump(data, size, ZSTD_e_continue); }
  // ZSTD_e_flush closes the current block: a reader can decode everything up to here even if the
  // process is killed before the frame ends.
  bool flush() override { return pump(nullptr, 0, ZSTD_e_flush); }
  bool finish() override { return pump(nullptr, 0, ZSTD_e_end); }

 private:
  bool pump(const char* data, size_t size, ZSTD_EndDirective mode) {
    if (!cctx_) {
      error_ = "cannot create a zstd context";
      return false;
    }
    ZSTD_inBuffer in{data, size, 0};
    for (;;) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      const size_t remaining = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(remaining)) {
        error_ = ZSTD_getErrorName(remaining);
        return false;
      }
      if (out.pos && !write_all(fd_, out_.data(), out.pos, &error_)) return false;
      const bool done = mode == ZSTD_e_continue ? in.pos == in.size : remaining == 0;
      if (done) return true;
    }
  }

  int fd_;
  ZSTD_CCtx* cctx_;
  std::vector<char> out_;
};

class StringSink : public Sink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  bool write(const char* data, size_t size) override {
    out_->append(data, size);
    return true;
  }
  bool flush() override { return true; }
  bool finish() override { return true; }

 private:
  std::string* out_;
};

}  // namespace

std::unique_ptr<Sink> make_fd_sink(int fd, bool zstd) {
  if (zstd) return std::make_unique<ZstdSink>(fd);
  return std::make_unique<FdSink>(fd);
}

std::unique_ptr<Sink> make_string_sink(std::string* out) { return std::make_unique<StringSink>(out); }

}  // namespace gpumemtrace
