// interpose/writer/sink.h — where trace bytes go: the trace file, optionally through zstd.
// Used only by the writer thread (not thread-safe).
#pragma once

#include <memory>
#include <string>

namespace gpumemtrace {

class Sink {
 public:
  virtual ~Sink() = default;
  // Appends bytes. False when the data could not be written (the error is in error()).
  [[nodiscard]] virtual bool write(const char* data, size_t size) = 0;
  // Makes everything written so far readable by another process (a complete zstd block).
  [[nodiscard]] virtual bool flush() = 0;
  // Ends the stream (zstd frame epilogue). The file stays open; the owner closes it.
  [[nodiscard]] virtual bool finish() = 0;
  const std::string& error() const { return error_; }

 protected:
  std::string error_;
};

class TraceFile;

// A sink writing to `file` (which must outlive it); compressed with zstd when `zstd` is true.
std::unique_ptr<Sink> make_file_sink(TraceFile* file, bool zstd);

// An in-memory sink for tests.
std::unique_ptr<Sink> make_string_sink(std::string* out);

}  // namespace gpumemtrace
