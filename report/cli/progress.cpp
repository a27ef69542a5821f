// report/cli/progress.cpp — the progress line (progress.h). Writes with write(2), never through
// std::cerr, so that it cannot interleave with a buffered message.
#include "report/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "report/outputs/units.h"

namespace gpumemtrace::report {

namespace {
constexpr std::chrono::milliseconds kRedrawEvery(100);
constexpr const char kClear[] = "\r\033[K";  // to column 0, erase to the end of the line

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;  // a progress line is not worth an error
    done += static_cast<size_t>(n);
  }
}
}  // namespace

ProgressLine::ProgressLine(int fd, std::chrono::milliseconds delay)
    : fd_(fd), enabled_(isatty(fd) == 1), delay_(delay) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::start_file(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
  name_ = name;
  bytes_ = lines_ = 0;
  started_ = last_draw_ = std::chrono::steady_clock::now();
}

void ProgressLine::on_read(std::string_view chunk) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_ += chunk.size();
  lines_ += static_cast<uint64_t>(std::count(chunk.begin(), chunk.end(), '\n'));
  const auto now = std::chrono::steady_clock::now();
  if (now - started_ < delay_ || (shown_ && now - last_draw_ < kRedrawEvery)) return;
  last_draw_ = now;
  draw();
}

void ProgressLine::draw() {
  const double seconds = std::chrono::duration<double>(last_draw_ - started_).count();
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.2f M", seconds > 0 ? static_cast<double>(lines_) / seconds / 1e6 : 0.0);
  std::string text = "gpumem-report: reading " + name_ + ": " + format_bytes(bytes_) + ", " + rate + " events/s";
  if (text.size() > 100) text = "gpumem-report: reading ..." + text.substr(text.size() - 74);  // fits a terminal
  write_all(fd_, kClear + text);
  shown_ = true;
}

void ProgressLine::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
}

void ProgressLine::clear_locked() {
  if (!shown_) return;
  write_all(fd_, kClear);
  shown_ = false;
}

}  // namespace gpumemtrace::report
