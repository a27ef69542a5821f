// report/reader/byte_source.cpp — see byte_source.h.
#include "report/reader/byte_source.h"

#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "util/ends_with.h"

namespace gpumemtrace::report {
namespace {

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : file_(std::fopen(path.c_str(), "rb")) {
    if (!file_) throw std::runtime_error("cannot open: " + std::string(std::strerror(errno)));
  }
  explicit FileSource(std::FILE* file) : file_(file) {}
  ~FileSource() override { std::fclose(file_); }
  // Whether the file starts with zstd's magic number; reads its first bytes and goes back to the
  // start (false, and nothing read, for a file that cannot seek).
  bool starts_like_zstd() {
    char head[4];
    if (std::ftell(file_) != 0) return false;
    const size_t n = std::fread(head, 1, sizeof head, file_);
    if (std::fseek(file_, 0, SEEK_SET) != 0) throw std::runtime_error("cannot read: " + std::string(std::strerror(errno)));
    return report::starts_like_zstd(std::string_view(head, n));
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  size_t read(char* out, size_t capacity) override {
    size_t n = std::fread(out, 1, capacity, file_);
    if (n == 0 && std::ferror(file_)) throw std::runtime_error("read error");
    consumed_ += n;
    return n;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::FILE* file_;
  uint64_t consumed_ = 0;
};

// Streams a zstd file through a fixed-size input buffer, so memory stays constant.
class ZstdSource : public ByteSource {
 public:
  explicit ZstdSource(std::unique_ptr<ByteSource> compressed)
      : compressed_(std::move(compressed)), stream_(ZSTD_createDStream()),
        input_buffer_(ZSTD_DStreamInSize()) {
    if (!stream_) throw std::runtime_error("zstd: out of memory");
    ZSTD_initDStream(stream_);
    ZSTD_DCtx_setParameter(stream_, ZSTD_d_windowLogMax, kMaxZstdWindowLog);
  }
  ~ZstdSource() override { ZSTD_freeDStream(stream_); }
  ZstdSource(const ZstdSource&) = delete;
  ZstdSource& operator=(const ZstdSource&) = delete;

  size_t read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        size_t n = compressed_->read(input_buffer_.data(), input_buffer_.size());
        if (n == 0) {
          // A frame left open at the end of the file means the writer was killed mid-block.
          truncated_ = frame_open_;
          return 0;
        }
        input_ = ZSTD_inBuffer{input_buffer_.data(), n, 0};
      }
      size_t hint = ZSTD_decompressStream(stream_, &output, &input_);
      if (ZSTD_isError(hint)) {
        throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(hint));
      }
      frame_open_ = hint != 0;
    }
    output_full_ = output.pos == output.size;
    return output.pos;
  }
  bool truncated() const override { return truncated_; }
  uint64_t consumed() const override { return compressed_->consumed(); }
  // Everything decoded that the compressed source had: its input used up, and no output held back.
  bool caught_up() const override {
    return compressed_->caught_up() && input_.pos == input_.size && !output_full_;
  }
  void cancel() override { compressed_->cancel(); }

 private:
  std::unique_ptr<ByteSource> compressed_;
  ZSTD_DStream* stream_;
  std::vector<char> input_buffer_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  bool frame_open_ = false;
  bool truncated_ = false;
  bool output_full_ = false;  // the last read filled its buffer: more output may be waiting
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  size_t read(char* out, size_t capacity) override {
    size_t n = std::min(capacity, bytes_.size());
    std::memcpy(out, bytes_.data(), n);
    bytes_.remove_prefix(n);
    consumed_ += n;
    return n;
  }
  uint64_t consumed() const override { return consumed_; }

 private:
  std::string_view bytes_;
  uint64_t consumed_ = 0;
};

class ObservedSource : public ByteSource {
 public:
  ObservedSource(std::unique_ptr<ByteSource> inner, ReadObserver& observer)
      : inner_(std::move(inner)), observer_(observer) {}
  size_t read(char* out, size_t capacity) override {
    const uint64_t before = inner_->consumed();
    const size_t n = inner_->read(out, capacity);
    observer_.on_read(std::string_view(out, n), inner_->consumed() - before);
    return n;
  }
  bool truncated() const override { return inner_->truncated(); }
  uint64_t consumed() const override { return inner_->consumed(); }
  bool caught_up() const override { return inner_->caught_up(); }
  void cancel() override { inner_->cancel(); }

 private:
  std::unique_ptr<ByteSource> inner_;
  ReadObserver& observer_;
};

}  // namespace

std::unique_ptr<ByteSource> observed_byte_source(std::unique_ptr<ByteSource> inner, ReadObserver& observer) {
  return std::make_unique<ObservedSource>(std::move(inner), observer);
}

bool starts_like_zstd(std::string_view head) { return head.substr(0, 4) == std::string_view("\x28\xb5\x2f\xfd", 4); }

std::unique_ptr<ByteSource> zstd_byte_source(std::unique_ptr<ByteSource> compressed) {
  return std::make_unique<ZstdSource>(std::move(compressed));
}

std::unique_ptr<ByteSource> open_byte_source(const std::string& path) {
  auto file = std::make_unique<FileSource>(path);
  if (util::ends_with(path, ".zst") || file->starts_like_zstd()) return std::make_unique<ZstdSource>(std::move(file));
  return file;
}

std::unique_ptr<ByteSource> file_byte_source(std::FILE* file) { return std::make_unique<FileSource>(file); }

std::unique_ptr<ByteSource> memory_byte_source(std::string_view bytes) {
  return std::make_unique<MemorySource>(bytes);
}

}  // namespace gpumemtrace::report
