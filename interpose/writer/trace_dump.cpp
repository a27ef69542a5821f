// interpose/writer/trace_dump.cpp — a dump: what the trace holds so far, sealed into a trace of its own
// while the trace goes on (Writer::dump, writer.h; gpumemtrace_dump(), Python's gpumemtrace.dump()).
//
// The copy is the trace's bytes up to a point where everything is whole (the writer drained the ring,
// wrote and flushed, and ended the zstd frame there), then what a finished trace ends with, written
// to the copy only: the live records of a capped trace and a footer whose "end" is "dump". Every
// definition an event line refers to comes before it in the trace, so the copy reads alone. With the
// flight recorder, the copy is the window (writer.h): the previous segment, then the current one
// after its checkpoint; the flight recorder's seals at exit and after an out-of-memory failure
// (flight.cpp) write it the same way.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/writer/serializer.h"
#include "interpose/writer/sink.h"
#include "interpose/writer/wait.h"
#include "interpose/writer/writer.h"
#include "trace/format.h"
#include "util/ends_with.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
namespace {

// Copies bytes [from, to) of `in` to `out`. False with `error` when a read or a write failed.
bool copy_range(int in, uint64_t from, uint64_t to, TraceFile* out, std::string* error) {
  std::vector<char> chunk(1 << 20);
  for (uint64_t at = from; at < to;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), to - at));
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

void Writer::serve_dump_request() {
  if (!file_.can_cut_back()) return;  // a stream: nothing beside it to ask through
  const std::string request = file_.path() + format::kDumpRequestSuffix;
  const int fd = open(request.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;  // none (the usual case: one failed open per poll)
  struct stat st {};
  char asked[4096];
  ssize_t n = -1;
  // Another user's file (a shared folder) asks nothing: it could name any path this process may write.
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
    while ((n = read(fd, asked, sizeof asked)) < 0 && errno == EINTR) {
    }
  }
  close(fd);
  if (n < 0) return;
  unlink(request.c_str());
  std::string path(asked, static_cast<size_t>(n));
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  std::string message;
  bool written = false;
  try {
    written = write_dump(path, &message);
  } catch (...) {  // out of memory: the trace itself goes on
    message = "out of memory";
  }
  const std::string answer = (written ? "ok " : "error ") + message + "\n";
  const std::string result = file_.path() + format::kDumpResultSuffix;
  const std::string aside = result + ".part";
  const int out = open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) return;
  const bool whole = write(out, answer.data(), answer.size()) == static_cast<ssize_t>(answer.size());
  close(out);
  if (!whole || rename(aside.c_str(), result.c_str()) != 0) unlink(aside.c_str());
}

// Everything recorded so far in the file and whole: the ring drained, written, flushed, the zstd frame
// ended. False when the trace itself could not be written.
bool Writer::make_whole() {
  drain_once(SIZE_MAX);
  publish_devices();
  note_drops();
  serializer_->refresh_modules();
  flush_buffer(true);
  if (!output_failed_ && zstd_ && !sink_->finish()) output_failed("cannot write the trace: " + sink_->error());
  if (output_failed_) return false;
  whole_bytes_ = file_.written();
  return true;
}

// Into `out`: the trace so far (make_whole first), or with the flight recorder its window (the
// previous segment whole, then the current one after its checkpoint; onto the previous segment
// itself when `out` is it), then what a finished trace ends with: the live records of a capped trace
// and a footer with `end`. False with `error`.
bool Writer::write_window(TraceFile* out, const ProcessEnd& end, std::string* error) {
  struct Part {
    const TraceFile* file;
    uint64_t from, to;
  };
  std::vector<Part> parts;
  const bool windowed = keeping() && previous_.fd() >= 0;
  if (windowed && out != &previous_) parts.push_back({&previous_, 0, previous_.written()});
  parts.push_back({&file_, windowed ? checkpoint_end_ : 0, whole_bytes_});
  for (const Part& part : parts) {
    const int in = part.file->open_for_reading();
    if (in < 0) {
      *error = "the trace " + part.file->path() + " is not a regular file of ours (a FIFO, a stream): it cannot be copied";
      return false;
    }
    const bool copied = copy_range(in, part.from, part.to, out, error);
    ::close(in);
    if (!copied) return false;
  }
  // The ending, into the copy only: buffer_ is empty (flushed by make_whole) and goes back to the
  // trace empty.
  if (capped_) live_.for_each([&](const LiveAllocation& a) { serializer_->live(a); });
  serializer_->footer(window_events(), drops_written_, util::monotonic_ns(), not_written_, end);
  const std::unique_ptr<Sink> sink = make_file_sink(out, zstd_);
  const bool written = sink->write(buffer_.data(), buffer_.size()) && sink->finish();
  if (!written) *error = sink->error();
  buffer_.clear();
  return written;
}

bool Writer::write_dump(const std::string& asked, std::string* message) {
  if (!make_whole()) {
    *message = "the trace itself could not be written";
    return false;
  }
  const std::string path = asked.empty() ? tagged_path(file_.path(), "-dump") : asked;
  if (util::ends_with(path, ".zst") != zstd_) {
    *message = zstd_ ? "the trace is compressed (zstd), and so is its dump: name it *.jsonl.zst, not " + path
                     : "the trace is plain text, and so is its dump: name it *.jsonl, not " + path;
    return false;
  }
  if (!file_.can_cut_back()) {
    *message = "the trace " + file_.path() + " is not a regular file (a FIFO, a stream): it cannot be copied";
    return false;
  }
  TraceFile out;
  std::string note, error;
  const bool copied = open_trace_file(path, /*named=*/true, &out, &note, &error) &&
                      write_window(&out, ProcessEnd{format::End::Dump, -1, 0}, &error);
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
