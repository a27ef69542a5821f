// report/reader/line_reader.h — splits a ByteSource into lines without copying them, reading ahead
// on a second thread.
//
// A producer thread reads the source (and so decompresses it), finds the line ends and hands whole
// blocks of lines to the caller's thread through a bounded queue; the caller parses one block while
// the next is read. A source that ends within the first block is read on the caller's thread and no
// thread is started (tests, the fuzzer, small traces), nor where the process may use one CPU only
// (the thread could only take turns with the parser, at a cost).
//
// Version 2 event lines can be scanned ahead too (scan_events_ahead; compact_event.h): the producer
// reads each common event line (site, time, address, size, segment, pool: nearly every line of a
// trace) into 64 bytes, so that the caller's thread is left with the dispatch and the analyses.
// Other lines, and the blocks read on the caller's thread (the first one, or all of them without a
// producer), are left for the caller to scan.
//
// Each line handed out is followed in memory by at least kLinePadding readable bytes, as simdjson
// requires, so the parser can read it in place. Memory: kBlocks blocks of about `chunk` bytes (one
// grows to hold a longer line, up to max_line), and with scan_events_ahead their common event lines,
// 64 bytes for each (a line takes at least 8 bytes of a block: {"e":1} and its newline): never
// proportional to the file.
//
// Errors of the source (I/O, corrupt zstd data) and a line longer than max_line are thrown by next()
// after every line before them has been handed out, as if the reading were not ahead.
//
// Thread-safety: one LineReader is used by one thread. The source is read on the producer thread
// (ReadObserver callbacks run there), never by two threads at once; the caller may use the source
// again (truncated()) once next() has returned false or thrown, or after the reader is destroyed.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "report/reader/byte_source.h"
#include "report/reader/compact_event.h"
#include "trace/format.h"

namespace gpumemtrace::report {

inline constexpr size_t kLinePadding = 64;  // >= SIMDJSON_PADDING (checked in trace_reader.cpp)
// The longest line accepted (format.h): a trace line is a few hundred bytes (a deep stack with long
// names a few KiB) and the writer never writes one longer, so a longer one is not a trace (a binary
// file without newlines would otherwise be read into memory whole).
inline constexpr size_t kMaxLineBytes = format::kMaxLineBytes;

// The CPUs this process may run on (its affinity mask), at least 1.
size_t usable_cpus();

struct Line {
  std::string_view text;  // without the '\n'; valid until the next call to next()
  uint64_t number = 0;    // 1-based
  bool terminated = true; // false for a last line without '\n' (possibly cut short)
  // A common event line scanned ahead (LineReader's scan_events_ahead), else null: the caller scans
  // the line itself. Valid until the next call to next().
  const reader::CommonEventLine* event = nullptr;
};

class LineReader {
 public:
  // Blocks in flight: one being parsed, one being read, two queued to absorb jitter.
  static constexpr size_t kBlocks = 4;
  static constexpr size_t kDefaultChunk = size_t{256} << 10;

  explicit LineReader(ByteSource& source, size_t chunk = kDefaultChunk, size_t max_line = kMaxLineBytes,
                      bool scan_events_ahead = false);
  ~LineReader();  // stops the producer thread (it finishes the read it is in) and joins it
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line, or false at the end of the input. Throws std::runtime_error for a line longer than
  // max_line bytes, and whatever the source throws, once every line before the error was returned.
  bool next(Line& line);

 private:
  // Whole lines, then at least kLinePadding bytes of room. Owned by the producer while it fills it,
  // by the consumer from the queue until it moves past its last line.
  struct Block {
    std::vector<char> bytes;
    std::vector<uint32_t> ends;  // offset just past each line's text (its '\n', or the end of input)
    bool last = false;           // nothing follows: the end of the input, or `error`
    bool unterminated = false;   // the last line has no '\n' (only when `last`)
    std::exception_ptr error;    // thrown after this block's lines
    // Scanned ahead (producer side; empty otherwise): the common event lines among `ends`, in order.
    std::vector<uint32_t> event_lines;  // the index in `ends` of each line in `events`
    std::vector<reader::CommonEventLine> events;
  };

  void fill(Block& block);            // producer side: reads the next lines into `block`
  void read_lines(Block& block);      // fill() without the error handling
  void scan_events(Block& block);     // producer side: the block's common event lines, ahead
  void start_producer();
  void produce();                     // the producer thread's loop
  Block* take_ready();                // consumer: the next filled block (waits)
  void give_back(Block* block);       // consumer: done with it

  ByteSource& source_;
  const size_t chunk_;
  const size_t max_line_;
  const bool scan_events_ahead_;
  reader::Fields scan_scratch_;  // producer side: scan_events' own

  // Producer state (the caller's thread until the producer starts, then the producer's alone).
  std::string partial_;  // bytes of a line begun in the previous block
  bool source_done_ = false;

  // Shared state, guarded by mutex_. Fixed capacity (kBlocks): the hand-over never allocates.
  std::mutex mutex_;
  std::condition_variable changed_;  // a block became ready or free, or stop_ was set
  std::vector<Block*> free_;
  std::array<Block*, kBlocks> ready_{};  // filled blocks in input order: a ring
  size_t ready_head_ = 0;
  size_t ready_count_ = 0;
  bool stop_ = false;

  // Consumer state.
  std::unique_ptr<Block[]> blocks_;
  Block* current_ = nullptr;
  size_t line_index_ = 0;   // the next line of current_
  size_t event_index_ = 0;  // the next of current_->events
  uint64_t number_ = 0;
  bool started_ = false;    // the first block was read
  bool synchronous_ = false;  // no thread could be started: blocks are read here, one at a time
  bool finished_ = false;   // the last block was consumed
  std::thread producer_;
};

}  // namespace gpumemtrace::report
