// report/cli/progress.h — the progress line gpumem-report shows on stderr while it reads traces:
// `gpumem-report: reading FILE: 1.2 GiB, 3.4 M events/s`, redrawn in place and cleared when done.
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

  void start_file(const std::string& name);  // clears the line; counts restart
  void on_read(std::string_view chunk) override;
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
  uint64_t bytes_ = 0;
  uint64_t lines_ = 0;  // events, plus the few module, frame and stack lines
  std::chrono::steady_clock::time_point started_, last_draw_;
};

}  // namespace gpumemtrace::report
