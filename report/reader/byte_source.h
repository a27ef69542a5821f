// report/reader/byte_source.h — where a trace's bytes come from: a plain file, a zstd-compressed
// file, or memory (tests and the fuzzer). The line reader sits on top and never knows which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace gpumemtrace::report {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Fills up to `capacity` bytes; returns how many, 0 at the end. Throws std::runtime_error on an
  // I/O or decompression error (corrupt data, not a cut-short stream).
  virtual size_t read(char* out, size_t capacity) = 0;
  // True when the input ended in the middle of a compressed frame: a killed writer.
  virtual bool truncated() const { return false; }
  // Bytes taken from the file (or memory) so far: for a .zst file, compressed ones (0: not counted).
  virtual uint64_t consumed() const { return 0; }
  // True when the last read() gave everything there is for now, and the next one will wait for more
  // (a source that follows a growing trace: follow_source.h). The line reader then hands the lines
  // it has to the parser at once, instead of waiting for its block to fill.
  virtual bool caught_up() const { return false; }
  // Called from another thread than the reading one (the line reader, when it is destroyed): a
  // read() that waits for more data (follow_source.h) returns 0 now, and every later one too.
  virtual void cancel() {}
};

// The largest zstd window a trace may ask for (2^27 = 128 MiB, libzstd's own default for streaming):
// a frame that asks for more is an error ("Frame requires too much memory for decoding"), not an
// allocation of gigabytes. The recorder's frames use a few MiB at most.
inline constexpr int kMaxZstdWindowLog = 27;

// Opens `path`, decompressing when the name ends in ".zst" or the file starts with zstd's magic
// number (a copy of a stream, reached as /proc/self/fd/N, has no suffix to say). Throws
// std::runtime_error when the file cannot be opened.
std::unique_ptr<ByteSource> open_byte_source(const std::string& path);

// True when `head` starts with the magic number of a zstd frame (28 b5 2f fd).
bool starts_like_zstd(std::string_view head);

// `compressed`, decompressed as it is read (at most a 2^kMaxZstdWindowLog window).
std::unique_ptr<ByteSource> zstd_byte_source(std::unique_ptr<ByteSource> compressed);

// An open stdio file, read from its current position; the source owns it and closes it.
std::unique_ptr<ByteSource> file_byte_source(std::FILE* file);

// Bytes held by the caller (must outlive the source).
std::unique_ptr<ByteSource> memory_byte_source(std::string_view bytes);

// Sees every chunk as it is read (the CLI's progress line). Called on the reading thread.
class ReadObserver {
 public:
  virtual ~ReadObserver() = default;
  // `chunk`: the bytes read (decompressed); `file_bytes`: what reading them took from the file.
  virtual void on_read(std::string_view chunk, uint64_t file_bytes) = 0;
};

// `inner`, with every chunk it returns shown to `observer` (which must outlive the source).
std::unique_ptr<ByteSource> observed_byte_source(std::unique_ptr<ByteSource> inner, ReadObserver& observer);

}  // namespace gpumemtrace::report
