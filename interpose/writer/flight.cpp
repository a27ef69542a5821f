// interpose/writer/flight.cpp — the flight recorder (GPUMEMTRACE_KEEP): rotating segments, each with a
// checkpoint of what the program holds, and the window of the run's end sealed into one trace.
//
// All of it is the writer thread's work, between two events it drains: the hooks do what they always
// do. A checkpoint costs the size of what is held (one line per live allocation, mapping or open
// scope) and of the definitions written again; a seal copies the window (at most KEEP of trace).
//
// Segments. The trace's name holds the segment being written; its name with "-prev" the one before
// (a rotation renames the one to the other, replacing the older, and starts a new file at the name).
// A segment is cut when its trace text reaches half of a KEEP size, or when half of a KEEP duration
// has passed since its checkpoint (by the events' clock): on disk there are at most two, so at most
// KEEP of text; what they hold is at least the last half of KEEP, at most all of it.
//
// A segment reads alone: the process's header, every module, frame, stack, site and device line
// written so far (ids unchanged), then the checkpoint, then the events. The checkpoint is what the
// program holds (held_state.h), one event line each, marked "initial" (trace/format.h): the report
// takes them as the state the window started from (the allocator model is seeded with them, the
// leaks and growth are the window's own; docs/trace-format.md). Their seq are renumbered S-n+1..S and
// their t is T, where S and T are the seq and t of the last event line written before the cut: the
// event lines after the checkpoint are delta-coded against (S, T), as they would be right after the
// previous segment's last line. A checkpoint with nothing held is one "sync" line at (S, T) instead.
// So the window — the previous segment whole, then the current one after its checkpoint — reads as
// one trace: the same bytes, the same deltas, each id defined once (the previous segment defines
// everything defined before the cut; what came after is defined after the checkpoint).
#include <time.h>

#include <algorithm>
#include <utility>

#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/writer/sink.h"
#include "interpose/writer/writer.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
namespace {

// Room kept under KEEP for the lines one event may bring past a segment's cut.
constexpr uint64_t kSegmentHeadroomBytes = 16 * 1024;
// Seals after out-of-memory failures: at most one a second (a server failing in a loop would copy
// its window each time); a later failure within the second is sealed when the second is over.
constexpr uint64_t kOomSealIntervalNs = 1000000000ull;
// A long checkpoint goes to the file in parts of this size (the writer's buffer stays small).
constexpr size_t kCheckpointFlushBytes = 256 * 1024;
// The api of a checkpoint's "sync" line.
constexpr const char kCheckpointApi[] = "gpumemtrace_checkpoint";

bool out_of_memory(const EventRecord& r) {
  return r.op == format::Op::BlockOom || (r.op == format::Op::Alloc && (r.flags & kHasResult) && r.result == 2);
}

}  // namespace

void Writer::start_keeping(const HeaderInfo& header) {
  const Config& cfg = shared_->config;
  if (!cfg.keep_ns && !cfg.keep_bytes) return;
  if (!file_.can_cut_back()) {
    log_line(("GPUMEMTRACE_KEEP needs a trace file of its own; " + file_.path() +
              " is not one (a FIFO, a stream): the whole run is kept")
                 .c_str());
    return;
  }
  keep_ns_ = cfg.keep_ns;
  keep_bytes_ = cfg.keep_bytes;
  segment_limit_ = keep_bytes_ ? keep_bytes_ / 2 - kSegmentHeadroomBytes : 0;
  max_bytes_ = 0;  // KEEP bounds the trace; no cap stops its detail
  header_ = header;
  segment_time_start_ = header.start_monotonic_ns;
  trace_name_ = file_.path();
  scratch_ = std::make_unique<EventRecord>();
  serializer_->keep_definitions();
}

uint64_t Writer::segment_events() const { return serializer_->events_written() - segment_events_start_; }

uint64_t Writer::window_events() const {
  if (!keeping() || previous_.fd() < 0) return segment_events();
  return serializer_->events_written() - previous_events_start_ - checkpoint_events_;
}

void Writer::note_kept(const EventRecord& r, uint32_t stack) {
  held_.apply(r, stack);
  if (out_of_memory(r)) oom_pending_ = true;
}

bool Writer::rotation_due(const EventRecord& r) const {
  if (keep_bytes_) return bytes_written_ + buffer_.size() - segment_text_start_ >= segment_limit_;
  return r.time_ns > segment_time_start_ && r.time_ns - segment_time_start_ >= keep_ns_ / 2;
}

void Writer::rotate() {
  // The segment that ends here, whole: written, flushed, its zstd frame ended.
  flush_buffer(true);
  if (!output_failed_ && zstd_ && !sink_->finish()) output_failed("cannot write the trace: " + sink_->error());
  if (output_failed_) return;
  // It becomes the previous segment (replacing the one before), and a new one starts at the name.
  previous_.close_if_ours();
  previous_ = TraceFile{};
  if (!file_.rename_to(tagged_path(trace_name_, "-prev"))) {
    // The name is no longer ours (renamed, removed): write on, uncut, rather than lose the run.
    log_line(("cannot rotate the trace: " + file_.path() + " is no longer the trace; GPUMEMTRACE_KEEP stops").c_str());
    keep_ns_ = keep_bytes_ = 0;
    return;
  }
  previous_ = std::exchange(file_, TraceFile{});
  previous_events_start_ = segment_events_start_;
  std::string note, error;
  if (!open_trace_file(trace_name_, /*named=*/false, &file_, &note, &error)) {
    output_failed("cannot start the trace's next segment: " + error);
    return;
  }
  if (file_.path() != trace_name_) log_line(("the trace goes on in " + file_.path() + " (" + note + ")").c_str());
  // sink_ writes to file_, which is the new segment now: its zstd context is kept (a new one costs
  // more than the rest of the cut), and its next frame starts the new file.
  whole_bytes_ = 0;
  segment_events_start_ = serializer_->events_written();
  segment_text_start_ = bytes_written_;
  serializer_->header(header_);
  serializer_->rewrite_definitions();
  write_checkpoint();
  checkpoint_events_ = serializer_->events_written() - segment_events_start_;
  flush_buffer(true);
  if (!output_failed_ && zstd_ && !sink_->finish()) output_failed("cannot write the trace: " + sink_->error());
  checkpoint_end_ = whole_bytes_ = file_.written();
  segment_time_start_ = serializer_->last_time_ns();
  // A checkpoint that fills most of a segment (a program holding a great many things): segments of
  // twice its size, so that each still holds events; the disk then holds more than KEEP.
  const uint64_t checkpoint_bytes = bytes_written_ - segment_text_start_;
  if (keep_bytes_ && checkpoint_bytes * 2 > segment_limit_) {
    log_line(("a checkpoint takes " + std::to_string(checkpoint_bytes) + " bytes, more than half a segment of GPUMEMTRACE_KEEP=" +
              std::to_string(keep_bytes_) + ": segments grow to twice that")
                 .c_str());
    segment_limit_ = checkpoint_bytes * 2;
  }
}

void Writer::write_checkpoint() {
  const uint64_t last_seq = serializer_->last_seq(), last_time = serializer_->last_time_ns();
  if (last_seq == 0) return;  // no event line yet: nothing to start from
  std::vector<const HeldEvent*> held = held_.in_order();
  // Only allocator settings held (records of their own, not event lines): the marker line follows them.
  const bool events_held =
      std::any_of(held.begin(), held.end(), [](const HeldEvent* h) { return h->op != format::Op::AllocatorSettings; });
  // The checkpoint's records take the seqs just below the last event line's (the marker: that one), in
  // increasing order, as the reader requires; each was made by a record of its own at or before it, so
  // there is room, bar a trace's first few records: then the oldest are left out.
  const uint64_t room = events_held ? last_seq : last_seq - 1;
  if (held.size() > room) held.erase(held.begin(), held.end() - static_cast<std::ptrdiff_t>(room));
  serializer_->restart_deltas();
  EventRecord& r = *scratch_;
  r.native_depth = r.python_depth = 0;
  r.interned_stack = 0;
  uint64_t seq = room - held.size() + 1;
  for (const HeldEvent* h : held) {
    if (h->op != format::Op::AllocatorSettings) continue;
    h->fill(&r);
    r.seq = seq++;
    r.time_ns = last_time;
    serializer_->allocator_settings(r);  // in force from the checkpoint on
  }
  if (!events_held) {
    r.op = format::Op::Sync;
    r.kind = format::Kind::None;
    r.flags = 0;
    r.device = -1;
    r.tid = 0;
    r.api = kCheckpointApi;
    r.driver_api = nullptr;
    r.addr = r.size = 0;
    r.seq = last_seq;
    r.time_ns = last_time;
    serializer_->event(r, 0);
    return;
  }
  for (const HeldEvent* h : held) {
    if (h->op == format::Op::AllocatorSettings) continue;
    h->fill(&r);
    r.seq = seq++;
    r.time_ns = last_time;
    r.flags &= static_cast<uint16_t>(~kDelayed);  // live at the checkpoint, whenever it was reported
    serializer_->event(r, h->stack, /*initial=*/true);
    if (buffer_.size() >= kCheckpointFlushBytes) flush_buffer(false);
  }
}

// The window sealed into the trace's name: the current segment's events after its checkpoint and the
// footer appended to the previous segment, which then replaces the current one. After the run, one
// trace, as without KEEP. The copy is at most half of KEEP, and the disk holds at most that much more
// meanwhile. False when it could not be: both segments stay, each readable (the previous one cut
// back to what it was), and the caller ends the current one as usual.
bool Writer::seal_at_exit() {
  if (!make_whole()) return false;
  const uint64_t previous_size = previous_.written();
  std::string error;
  const std::string name = file_.path();
  if (!write_window(&previous_, end_, &error) || !previous_.rename_to(name)) {
    bool removed = false;
    (void)previous_.cut_back_to(previous_size, &removed);
    log_line(("cannot seal the trace's window: " + (error.empty() ? std::string("cannot rename ") + previous_.path() : error) +
              "; its segments stay: " + previous_.path() + " and " + name)
                 .c_str());
    return false;
  }
  previous_.close_if_ours();
  return true;
}

// The window, up to an out-of-memory failure, sealed beside the trace (its name with "-oom"),
// replacing the one sealed after the failure before. The trace goes on.
void Writer::seal_after_oom(uint64_t now_ns) {
  if (now_ns - last_oom_seal_ns_ < kOomSealIntervalNs) return;
  oom_pending_ = false;
  last_oom_seal_ns_ = now_ns;
  if (!make_whole()) return;
  bool removed = false;
  if (oom_file_.fd() >= 0) (void)oom_file_.cut_back_to(0, &removed);
  oom_file_.close_if_ours();
  oom_file_ = TraceFile{};
  std::string note, error;
  if (!open_trace_file(tagged_path(trace_name_, "-oom"), /*named=*/false, &oom_file_, &note, &error) ||
      !write_window(&oom_file_, ProcessEnd{format::End::Dump, -1, 0}, &error)) {
    if (oom_file_.fd() >= 0) (void)oom_file_.cut_back_to(0, &removed);
    oom_file_.close_if_ours();
    oom_file_ = TraceFile{};
    log_line(("cannot seal the window of an out-of-memory failure: " + error).c_str());
  }
}

}  // namespace gpumemtrace
