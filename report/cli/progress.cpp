// report/cli/progress.cpp — the progress line (progress.h). Writes with write(2), never through
// std::cerr, so that it cannot interleave with a buffered message.
#include "report/cli/progress.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
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

uint64_t regular_file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string time_left_text(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  const long s = std::max(1L, std::lround(std::min(seconds, 1e9)));
  const long minutes = (s + 30) / 60;
  char text[64];
  if (s < 60) std::snprintf(text, sizeof text, "about %ld s left", s);
  else if (minutes < 60) std::snprintf(text, sizeof text, "about %ld min left", minutes);
  else std::snprintf(text, sizeof text, "about %ld h %ld min left", minutes / 60, minutes % 60);
  return text;
}

ProgressLine::ProgressLine(int fd, std::chrono::milliseconds delay)
    : fd_(fd), enabled_(isatty(fd) == 1), delay_(delay) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::start_file(const std::string& name, uint64_t total_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
  name_ = name;
  bytes_ = file_bytes_ = lines_ = 0;
  total_bytes_ = total_bytes;
  started_ = last_draw_ = std::chrono::steady_clock::now();
}

void ProgressLine::on_read(std::string_view chunk, uint64_t file_bytes) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_ += chunk.size();
  file_bytes_ += file_bytes;
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
  std::string text = "gpumem-report: reading " + name_ + ": ";
  // A file that grew while it was read (a trace still being written) would pass 100%: its size is then
  // no longer known, and the line falls back to the bytes read.
  if (total_bytes_ > 0 && file_bytes_ < total_bytes_) {
    const uint64_t percent = file_bytes_ * 100 / total_bytes_;  // < 100 while reading
    text += std::to_string(percent) + "% of " + format_bytes(total_bytes_) + ", " + rate + " events/s";
    if (file_bytes_ > 0 && seconds > 0) {
      const double left = static_cast<double>(total_bytes_ - file_bytes_) * seconds / static_cast<double>(file_bytes_);
      text += ", " + time_left_text(left);
    }
  } else {
    text += format_bytes(bytes_) + ", " + rate + " events/s";
  }
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
