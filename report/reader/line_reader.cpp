// report/reader/line_reader.cpp — splits a ByteSource into padded lines without copying them.
#include "report/reader/line_reader.h"

#include <cstring>
#include <string>

namespace gpumemtrace::report {

LineReader::LineReader(ByteSource& source, size_t chunk, size_t max_line)
    : source_(source), chunk_(chunk), max_line_(max_line), buffer_(chunk + kLinePadding) {}

bool LineReader::fill() {
  if (eof_) return false;
  // Move the partial line to the front, then grow only if the line alone fills the buffer.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - kLinePadding - end_ < chunk_ / 2) buffer_.resize(buffer_.size() * 2);
  size_t room = buffer_.size() - kLinePadding - end_;
  size_t n = source_.read(buffer_.data() + end_, room);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += n;
  return true;
}

bool LineReader::next(Line& line) {
  size_t scanned = begin_;
  for (;;) {
    const char* start = buffer_.data() + scanned;
    const void* newline = std::memchr(start, '\n', end_ - scanned);
    if (newline) {
      size_t pos = static_cast<const char*>(newline) - buffer_.data();
      line.text = std::string_view(buffer_.data() + begin_, pos - begin_);
      line.number = ++number_;
      line.terminated = true;
      begin_ = pos + 1;
      return true;
    }
    size_t scanned_len = end_ - begin_;  // fill() may move the data; rescan only the new bytes
    if (scanned_len > max_line_) {
      throw std::runtime_error("a line longer than " + std::to_string(max_line_) +
                               " bytes: not a gpumemtrace trace");
    }
    if (!fill()) break;
    scanned = begin_ + scanned_len;
  }
  if (begin_ == end_) return false;
  line.text = std::string_view(buffer_.data() + begin_, end_ - begin_);
  line.number = ++number_;
  line.terminated = false;
  begin_ = end_;
  return true;
}

}  // namespace gpumemtrace::report
