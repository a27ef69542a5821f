// report/reader/line_reader.cpp — see line_reader.h.
#include "report/reader/line_reader.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <system_error>

namespace gpumemtrace::report {

namespace {
// Line ends are kept as 32-bit offsets: a block never grows past twice the longest line allowed.
constexpr size_t kMaxLineLimit = size_t{1} << 30;

[[noreturn]] void line_too_long(size_t max_line) {
  throw std::runtime_error("a line longer than " + std::to_string(max_line) + " bytes: not a gpumemtrace trace");
}
}  // namespace

size_t usable_cpus() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0) return static_cast<size_t>(CPU_COUNT(&cpus));
  return std::max(1u, std::thread::hardware_concurrency());
}

LineReader::LineReader(ByteSource& source, size_t chunk, size_t max_line, bool scan_events_ahead)
    : source_(source),
      chunk_(std::max<size_t>(chunk, 1)),
      max_line_(std::min(max_line, kMaxLineLimit)),
      scan_events_ahead_(scan_events_ahead),
      blocks_(new Block[kBlocks]) {
  free_.reserve(kBlocks);
}

LineReader::~LineReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  // The producer may be inside a read that waits for the file to grow (follow_source.h): a parse
  // error or an early stop must not wait for a writer that may never write again.
  if (producer_.joinable()) {
    source_.cancel();
    producer_.join();
  }
}

// Reads whole lines into `block`: first the line begun in the previous block, then from the source
// until the block is full (or the input ends). The bytes after the last '\n' wait in partial_ for the
// next block. Throws for a source error or a line longer than max_line_; the lines found before stay
// in block.ends.
void LineReader::read_lines(Block& block) {
  // Room for the partial line and a chunk; a block grown for a long line gives the memory back.
  const size_t want = std::max(chunk_, partial_.size() + chunk_ / 2) + kLinePadding;
  if (block.bytes.size() < want || block.bytes.size() > 2 * want) {
    block.bytes.clear();
    block.bytes.shrink_to_fit();
    block.bytes.resize(want);
  }
  char* data = block.bytes.data();
  std::memcpy(data, partial_.data(), partial_.size());
  size_t size = partial_.size();
  partial_.clear();
  size_t line_start = 0;  // of the line not ended yet
  size_t scanned = 0;     // bytes searched for '\n'
  for (;;) {
    while (scanned < size) {
      const void* newline = std::memchr(data + scanned, '\n', size - scanned);
      if (!newline) {
        scanned = size;
        break;
      }
      const size_t end = static_cast<size_t>(static_cast<const char*>(newline) - data);
      if (end - line_start > max_line_) line_too_long(max_line_);
      block.ends.push_back(static_cast<uint32_t>(end));
      line_start = scanned = end + 1;
    }
    if (size - line_start > max_line_) line_too_long(max_line_);
    // The source follows a growing trace and has given all there is for now: the lines so far go to
    // the parser now (the next read waits for more). `ends` holds lines only once a read of this
    // block found some (partial_ holds no line end), so caught_up() speaks of that read.
    if (!block.ends.empty() && source_.caught_up()) break;
    size_t room = block.bytes.size() - kLinePadding - size;
    if (room == 0) {
      if (!block.ends.empty()) break;  // full: the line begun here moves to the next block
      block.bytes.resize(block.bytes.size() * 2);  // one line fills the block (bounded by max_line_)
      data = block.bytes.data();
      room = block.bytes.size() - kLinePadding - size;
    }
    const size_t n = source_done_ ? 0 : source_.read(data + size, room);
    if (n == 0) {
      source_done_ = true;
      block.last = true;
      if (size > line_start) {  // a last line without '\n'
        block.ends.push_back(static_cast<uint32_t>(size));
        block.unterminated = true;
      }
      return;
    }
    size += n;
  }
  partial_.assign(data + line_start, size - line_start);
}

void LineReader::scan_events(Block& block) {
  const char* data = block.bytes.data();
  size_t begin = 0;
  reader::CommonEventLine event;
  for (size_t i = 0; i < block.ends.size(); ++i) {
    const std::string_view text(data + begin, block.ends[i] - begin);
    begin = size_t{block.ends[i]} + 1;
    if (text.substr(0, 5) != "{\"e\":" || !reader::scan_common_event(text, scan_scratch_, event)) continue;
    block.event_lines.push_back(static_cast<uint32_t>(i));
    block.events.push_back(event);
  }
}

void LineReader::fill(Block& block) {
  block.event_lines.clear();
  block.events.clear();
  block.ends.clear();
  block.last = false;
  block.unterminated = false;
  block.error = nullptr;
  try {
    read_lines(block);
  } catch (...) {
    // Handed on after the block's complete lines, in the consumer's thread.
    block.error = std::current_exception();
    block.last = true;
    block.unterminated = false;
    source_done_ = true;
  }
}

void LineReader::produce() {
  for (;;) {
    Block* block = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || !free_.empty(); });
      if (stop_) return;
      block = free_.back();
      free_.pop_back();
    }
    fill(*block);
    if (scan_events_ahead_) scan_events(*block);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_[(ready_head_ + ready_count_) % kBlocks] = block;
      ++ready_count_;
    }
    changed_.notify_all();
    if (block->last) return;
  }
}

void LineReader::start_producer() {
  static const bool one_cpu = usable_cpus() == 1;
  if (one_cpu) {
    synchronous_ = true;
    return;
  }
  for (size_t i = 1; i < kBlocks; ++i) free_.push_back(&blocks_[i]);
  try {
    producer_ = std::thread(&LineReader::produce, this);
  } catch (const std::system_error&) {
    synchronous_ = true;  // no thread to be had: read on this one, as before there was read-ahead
    free_.clear();
  }
}

LineReader::Block* LineReader::take_ready() {
  if (!started_ || synchronous_) {
    // The first block is read on this thread: a small input never starts the producer.
    Block* block = &blocks_[0];
    fill(*block);
    if (!started_ && !block->last) start_producer();
    started_ = true;
    return block;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return ready_count_ > 0; });
  Block* block = ready_[ready_head_];
  ready_head_ = (ready_head_ + 1) % kBlocks;
  --ready_count_;
  return block;
}

void LineReader::give_back(Block* block) {
  if (!producer_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(block);
  }
  changed_.notify_all();
}

bool LineReader::next(Line& line) {
  for (;;) {
    if (current_) {
      const std::vector<uint32_t>& ends = current_->ends;
      if (line_index_ < ends.size()) {
        const size_t begin = line_index_ == 0 ? 0 : size_t{ends[line_index_ - 1]} + 1;
        line.text = std::string_view(current_->bytes.data() + begin, ends[line_index_] - begin);
        line.number = ++number_;
        ++line_index_;
        line.terminated = !(current_->unterminated && line_index_ == ends.size());
        line.event = nullptr;
        if (event_index_ < current_->event_lines.size() && current_->event_lines[event_index_] == line_index_ - 1)
          line.event = &current_->events[event_index_++];
        return true;
      }
      Block* done = current_;
      current_ = nullptr;
      if (done->last) {
        finished_ = true;
        std::exception_ptr error = done->error;
        done->error = nullptr;
        if (error) std::rethrow_exception(error);
        return false;
      }
      give_back(done);
    }
    if (finished_) return false;
    current_ = take_ready();
    line_index_ = 0;
    event_index_ = 0;
  }
}

}  // namespace gpumemtrace::report
