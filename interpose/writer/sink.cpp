// interpose/writer/sink.cpp — the trace file sinks (plain and zstd) and the in-memory test sink.
#include "interpose/writer/sink.h"

#include <zstd.h>

#include <vector>

#include "interpose/writer/trace_file.h"

namespace gpumemtrace {
namespace {

class FileSink : public Sink {
 public:
  explicit FileSink(TraceFile* file) : file_(file) {}
  bool write(const char* data, size_t size) override { return file_->write_all(data, size, &error_); }
  bool flush() override { return true; }  // no user-space buffer here: the writer buffers
  bool finish() override { return true; }

 private:
  TraceFile* file_;
};

// zstd level 1: trace text is repetitive enough that higher levels save little and cost the writer
// thread more per event (docs/performance.md, "Trace size").
constexpr int kZstdLevel = 1;

class ZstdSink : public Sink {
 public:
  explicit ZstdSink(TraceFile* file) : file_(file), out_(ZSTD_CStreamOutSize()) {
    cctx_ = ZSTD_createCCtx();
    if (cctx_) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, kZstdLevel);
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
      if (out.pos && !file_->write_all(out_.data(), out.pos, &error_)) return false;
      const bool done = mode == ZSTD_e_continue ? in.pos == in.size : remaining == 0;
      if (done) return true;
    }
  }

  TraceFile* file_;
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

std::unique_ptr<Sink> make_file_sink(TraceFile* file, bool zstd) {
  if (zstd) return std::make_unique<ZstdSink>(file);
  return std::make_unique<FileSink>(file);
}

std::unique_ptr<Sink> make_string_sink(std::string* out) { return std::make_unique<StringSink>(out); }

}  // namespace gpumemtrace
