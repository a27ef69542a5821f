// interpose/writer/trace_dump.cpp — a dump: what the trace holds so far, sealed into a trace of its own
// while the trace goes on (Writer::dump, writer.h; gpumemtrace_dump(), Python's gpumemtrace.dump()).
//
// The copy is the trace's bytes up to a point where everything is whole (the writer drained the ring,
// wrote and flushed, and ended the zstd frame there), then what a finished trace ends with, written
// to the copy only: the live records of a capped trace and a footer whose "end" is "dump". Every
// definition an event line refers to comes before it in the trace, so the copy reads alone.
#include <unistd.h>

#include <cstring>
#include <vector>

#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/writer/serializer.h"
#include "interpose/writer/sink.h"
#include "interpose/writer/wait.h"
#include "interpose/writer/writer.h"
#include "util/ends_with.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
namespace {

// Copies the first `size` bytes of `in` to `out`. False with `error` when a read or a write failed.
bool copy_prefix(int in, uint64_t size, TraceFile* out, std::string* error) {
  std::vector<char> chunk(1 << 20);
  for (uint64_t at = 0; at < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), size - at));
    const ssize_t n = pread(in, chunk.data(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n < 0 ? std::string("cannot read the trace: ") + strerror(errno) : "the trace is shorter than written";
      return false;
    }
    if (!out->write_all(chunk.data(), static_cast<size_t>(n), error)) return false;
    at += static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace

bool Writer::dump(const std::string& path, int timeout_ms, std::string* message) {
  int phase = dump_phase_.load(std::memory_order_acquire);
  // kDumpDone without a waiter: an earlier call gave up waiting; its result is gone.
  if ((phase != kNoDump && phase != kDumpDone) ||
      !dump_phase_.compare_exchange_strong(phase, kDumpClaimed, std::memory_order_acq_rel)) {
    *message = "another dump is under way";
    return false;
  }
  dump_path_ = path;
  dump_phase_.store(kDumpRequested, std::memory_order_release);
  const auto dumped = [this] { return dump_phase_.load(std::memory_order_acquire) == kDumpDone; };
  writer_wait::wait_until([&] { return dumped() || !alive(); }, timeout_ms);
  if (!dumped()) {
    *message = !alive() ? "the trace was finished first (the process is ending)"
                        : "the dump did not finish in " + std::to_string(timeout_ms) + " ms (it goes on in the background)";
    return false;
  }
  *message = dump_message_;
  const bool written = dump_written_;
  dump_phase_.store(kNoDump, std::memory_order_release);
  return written;
}

void Writer::serve_dump() {
  std::string message;
  bool written = false;
  try {
    written = write_dump(dump_path_, &message);
  } catch (...) {  // out of memory: the trace itself goes on
    message = "out of memory";
  }
  dump_message_ = message;
  dump_written_ = written;
  dump_phase_.store(kDumpDone, std::memory_order_release);
}

bool Writer::write_dump(const std::string& asked, std::string* message) {
  // Everything recorded so far, in the file and whole.
  drain_once(SIZE_MAX);
  publish_devices();
  note_drops();
  serializer_->refresh_modules();
  flush_buffer(true);
  if (!output_failed_ && zstd_ && !sink_->finish()) output_failed("cannot write the trace: " + sink_->error());
  if (output_failed_) {
    *message = "the trace itself could not be written";
    return false;
  }
  whole_bytes_ = file_.written();

  const std::string path = asked.empty() ? tagged_path(file_.path(), "-dump") : asked;
  if (util::ends_with(path, ".zst") != zstd_) {
    *message = zstd_ ? "the trace is compressed (zstd), and so is its dump: name it *.jsonl.zst, not " + path
                     : "the trace is plain text, and so is its dump: name it *.jsonl, not " + path;
    return false;
  }
  const int in = file_.open_for_reading();
  if (in < 0) {
    *message = "the trace " + file_.path() + " is not a regular file (a FIFO, a stream): it cannot be copied";
    return false;
  }
  TraceFile out;
  std::string note, error;
  bool copied = open_trace_file(path, /*named=*/true, &out, &note, &error) &&
                copy_prefix(in, whole_bytes_, &out, &error);
  ::close(in);
  if (copied) {
    // The ending, into the copy only: buffer_ is empty (flushed above) and goes back to the trace empty.
    if (capped_) live_.for_each([&](const LiveAllocation& a) { serializer_->live(a); });
    serializer_->footer(serializer_->events_written(), drops_written_, util::monotonic_ns(), not_written_,
                        ProcessEnd{format::End::Dump, -1, 0});
    const std::unique_ptr<Sink> sink = make_file_sink(&out, zstd_);
    copied = sink->write(buffer_.data(), buffer_.size()) && sink->finish();
    if (!copied) error = sink->error();
    buffer_.clear();
  }
  if (!copied) {
    bool removed = false;
    if (out.fd() >= 0) (void)out.cut_back_to(0, &removed);  // no half dump is left behind
    out.close_if_ours();
    *message = "cannot write the dump: " + error;
    return false;
  }
  out.close_if_ours();
  *message = out.path();
  return true;
}

}  // namespace gpumemtrace
