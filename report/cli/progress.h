// report/cli/progress.h — the progress line gpumem-report shows on stderr while it reads traces:
// `gpumem-report: reading FILE: 42% of 310.0 MiB, 3.40 M events/s, about 12 s left` when the input's
// size is known (files, and streams once spooled), `reading FILE: 1.2 GiB, 3.40 M events/s` when it is
// not; redrawn in place and cleared when done. The percentage is of the file's bytes (compressed ones
// for .zst) and never reads 100 while reading; the time left is the bytes left at the rate so far.
// Only when stderr is a terminal; a log or a pipe never sees it.
// Thread-safe: traces read at once (-j) report to one line, from their reading threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "report/reader/byte_source.h"

namespace gpumemtrace::report {

class ProgressLine : public ReadObserver {
 public:
  // `fd` is where the line goes; it is shown only if `fd` is a terminal. Nothing is drawn before
  // `delay` has passed on one file, so quick reports never flicker.
  explicit ProgressLine(int fd, std::chrono::milliseconds delay = std::chrono::milliseconds(300));
  ~ProgressLine() override;  // clears the line

  // Clears the line; counts restart. `total_bytes`: the size of what is read next (all the traces
  // read at once with -j), 0 when unknown.
  void start_file(const std::string& name, uint64_t total_bytes = 0);
  void on_read(std::string_view chunk, uint64_t file_bytes) override;
  void clear();
  bool enabled() const { return enabled_; }

 private:
  void draw();
  void clear_locked();

  std::mutex mutex_;  // guards everything below but fd_, enabled_ and delay_
  int fd_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::milliseconds delay_;
  std::string name_;
  uint64_t bytes_ = 0;       // read (decompressed)
  uint64_t file_bytes_ = 0;  // taken from the files
  uint64_t total_bytes_ = 0; // the files' size; 0: unknown
  uint64_t lines_ = 0;       // events, plus the few module, frame and stack lines
  std::chrono::steady_clock::time_point started_, last_draw_;
};

// The size of the regular file at `path`, or 0 (not one, or it cannot be read): a progress line's total.
uint64_t regular_file_size(const std::string& path);

// "about 12 s left", "about 3 min left", "about 2 h 10 min left": `seconds` as a person reads it.
std::string time_left_text(double seconds);

}  // namespace gpumemtrace::report
