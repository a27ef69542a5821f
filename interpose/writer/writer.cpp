// interpose/writer/writer.cpp — the writer thread: drain, serialize, flush, cap, and the final records.
#include "interpose/writer/writer.h"

#include <pthread.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/writer/private_fds.h"
#include "interpose/writer/serializer.h"
#include "interpose/writer/sink.h"
#include "interpose/writer/wait.h"
#include "util/ends_with.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
namespace {

using writer_wait::sleep_us;
using writer_wait::wait_until;

// Flush the text buffer to the sink once it holds this much, even between timed flushes.
constexpr size_t kBufferFlushBytes = 256 * 1024;

// Room kept under the cap for the lines one event may bring (its event line and a new stack's frame
// lines) and the "capped" record: the trace text up to the "capped" record stays <= cap. After it come
// only definitions (each unique stack of an allocation once), device and dropped lines, the live
// summary and the footer.
constexpr uint64_t kCapHeadroomBytes = 16 * 1024;

// GPUMEMTRACE_MAX_BYTES resolved: the default is taken from the trace's file system at start.
uint64_t trace_cap_bytes(const Config& cfg, int fd) {
  if (!cfg.max_bytes_default) return cfg.max_bytes;
  struct statvfs fs;
  const bool known = fd >= 0 && fstatvfs(fd, &fs) == 0;
  return default_trace_cap(known ? static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize : 0, known);
}

}  // namespace

Writer::Writer(RecorderShared* shared, TraceOpening* opening) : shared_(shared), opening_(opening) {
  buffer_.reserve(kBufferFlushBytes * 2);
}

Writer::~Writer() = default;

Writer* Writer::start(RecorderShared* shared, TraceOpening* opening) {
  Writer* w = new Writer(shared, opening);
  w->owner_pid_ = getpid();
  // Block every signal in the new thread (the mask is inherited at creation), then restore ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, nullptr,
      [](void* arg) -> void* {
        static_cast<Writer*>(arg)->run();
        return nullptr;
      },
      w);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    opening->error = std::string("cannot start the writer: ") + strerror(rc);
    delete w;
    return nullptr;
  }
  // The trace is opened by the thread, in its own descriptor table: wait for it (a thread's start and a
  // few system calls; a FIFO the user named may take up to 2 s to get a reader, as it always did).
  int state;
  while ((state = w->start_state_.load(std::memory_order_acquire)) == kOpening) sleep_us(50);
  if (state == kFailed) {
    pthread_join(thread, nullptr);
    delete w;
    return nullptr;
  }
  pthread_detach(thread);
  return w;
}

bool Writer::stop(int timeout_ms, const ProcessEnd& end) {
  end_ = end;
  stop_requested_.store(true, std::memory_order_release);
  return wait_finished(timeout_ms);
}

bool Writer::wait_finished(int timeout_ms) { return wait_until([&] { return !alive(); }, timeout_ms); }

bool Writer::flush(int timeout_ms, bool durable) {
  const uint64_t ticket = flush_requests_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (durable) {
    uint64_t asked = durable_ticket_.load(std::memory_order_relaxed);
    while (asked < ticket && !durable_ticket_.compare_exchange_weak(asked, ticket, std::memory_order_acq_rel)) {
    }
  }
  return wait_until([&] { return flushes_done_.load(std::memory_order_acquire) >= ticket || !alive(); },
                    timeout_ms) &&
         flushes_done_.load(std::memory_order_acquire) >= ticket;
}

bool Writer::thread_exists() const {
  const long tid = tid_.load(std::memory_order_acquire);
  if (tid == 0) return true;  // not running yet: start() is still waiting for it
  const int saved_errno = errno;
  // Signal 0 to the thread in the process that started it: ESRCH once that process is gone.
  const bool exists = syscall(SYS_tgkill, owner_pid_, tid, 0) == 0 || errno != ESRCH;
  errno = saved_errno;
  return exists;
}

bool Writer::flush_buffer(bool sync_sink) {
  if (output_failed_) {
    buffer_.clear();
    return false;
  }
  bool ok = buffer_.empty() || sink_->write(buffer_.data(), buffer_.size());
  if (ok) bytes_written_ += buffer_.size();
  buffer_.clear();
  if (ok && sync_sink) ok = sink_->flush();
  if (!ok) {
    output_failed("cannot write the trace: " + sink_->error());
  } else if (sync_sink || !zstd_) {
    whole_bytes_ = file_.written();  // whole lines; for zstd, whole blocks only after a flush
  }
  return ok;
}

// Keep draining (so no producer waits forever) but stop tracing: hooks become pass-throughs. What
// was written stays readable: a half line or half zstd block at the end is cut off (a file size limit
// stops a write in the middle), and a trace with nothing whole in it is removed.
void Writer::output_failed(const std::string& why) {
  output_failed_ = true;
  stop_recording();
  log_line((why + "; tracing stopped").c_str());
  bool removed = false;
  if (file_.cut_back_to(whole_bytes_, &removed) && removed) log_line(("removed the empty trace " + file_.path()).c_str());
}

void Writer::publish_devices() {
  for (DeviceInfoSlot& d : shared_->devices) {
    if (d.state.load(std::memory_order_acquire) != 2) continue;
    serializer_->device(d.device, d.name, d.total_bytes, d.free_bytes);
    d.state.store(3, std::memory_order_release);
  }
}

void Writer::note_drops() {
  const uint64_t total = shared_->dropped.load(std::memory_order_relaxed);
  if (total == drops_written_) return;
  serializer_->dropped(total - drops_written_, total);
  drops_written_ = total;
}

void Writer::write_event(const EventRecord& r) {
  if (!capped_ && max_bytes_ && bytes_written_ + buffer_.size() + kCapHeadroomBytes > max_bytes_) {
    capped_ = true;
    serializer_->capped(r, bytes_written_ + buffer_.size(), max_bytes_);
    log_line(("the trace reached GPUMEMTRACE_MAX_BYTES=" + std::to_string(max_bytes_) +
              ": from here on only totals and the allocations live at exit are written")
                 .c_str());
  }
  if (!capped_ && r.op == format::Op::AllocatorSettings) {
    if (keeping()) note_kept(r, 0);  // in force in the next segment too (its checkpoint writes it again)
    return serializer_->allocator_settings(r);
  }
  if (!capped_ && r.op == format::Op::Gc) return serializer_->gc(r);
  // A pause after the cap is detail the cap stopped: not an event either, so not counted.
  if (r.op == format::Op::Pause || r.op == format::Op::Resume) return capped_ ? void() : serializer_->pause(r);
  if (!capped_) {
    const uint32_t stack = serializer_->event(r, stack_of(r));
    if (keeping()) note_kept(r, stack);
    if (max_bytes_ || scope_bound_.tracking() || (r.op == format::Op::ScopeBegin && ScopeBound::bounds(r))) {
      live_.apply(r, stack);
    }
    scope_bound_.on_event(r, live_);
    return;
  }
  ++not_written_;
  live_.apply(r, LiveSet::acquires(r) ? stack_of(r) : 0);
  scope_bound_.on_event(r, live_);
}

// The serializer's stack id for r's stack (defining it in the trace if new). A stack the recording
// thread interned (r.interned_stack) is looked up by that id; its frames are read from the stack
// table only the first time the id comes.
uint32_t Writer::stack_of(const EventRecord& r) {
  const uint32_t interned = r.interned_stack;
  if (!interned) return serializer_->define_stack(r);
  if (interned < stack_of_interned_.size() && stack_of_interned_[interned]) return stack_of_interned_[interned];
  EventRecord frames_only;
  int n = 0;
  const uintptr_t* frames = shared_->stacks.frames(interned, &n);
  frames_only.native_depth = static_cast<int16_t>(n);
  memcpy(frames_only.native, frames, sizeof(uintptr_t) * n);
  const uint32_t stack = serializer_->define_stack(frames_only);
  if (interned >= stack_of_interned_.size())
    stack_of_interned_.resize(std::max<size_t>(interned + 1, 2 * stack_of_interned_.size()));
  stack_of_interned_[interned] = stack;
  return stack;
}

void Writer::write_live_summary() {
  live_.for_each([&](const LiveAllocation& a) {
    serializer_->live(a);
    if (buffer_.size() >= kBufferFlushBytes) flush_buffer(false);
  });
}

bool Writer::drain_once(size_t max_records) {
  EventRing& ring = *shared_->ring;
  size_t n = 0;
  for (; n < max_records; ++n) {
    const EventRecord* r = ring.peek();
    if (!r) break;
    if (!output_failed_) {
      write_event(*r);
      if (keeping() && rotation_due(*r)) rotate();
    }
    ring.pop();
    if (buffer_.size() >= kBufferFlushBytes) flush_buffer(false);
  }
  return n > 0;
}

// The writer thread's first steps: a descriptor table of its own, then the trace, opened in it, and
// its header line, written through. Tells start() how that went; never touches `opening_` afterwards
// (it belongs to start()).
bool Writer::open_trace() {
  mark_thread_internal();
  tid_.store(syscall(SYS_gettid), std::memory_order_release);
  TraceOpening& o = *opening_;
  // Its stderr is /dev/null then: its warnings go through a program thread.
  if (make_private_fd_table() == FdTable::Private) route_log_lines_through_program_threads();
  const bool opened = open_trace_file(o.path, o.named, &file_, &o.note, &o.error, &o.streams);
  if (opened) {
    o.opened_path = file_.path();
    zstd_ = util::ends_with(file_.path(), ".zst");
    sink_ = make_file_sink(&file_, zstd_);
    // Symbols are looked up from the first frame on, not here: the header is not kept waiting.
    serializer_ = std::make_unique<TraceSerializer>(&buffer_, shared_->config.symbolize);
    const Config& cfg = shared_->config;
    max_bytes_ = trace_cap_bytes(cfg, file_.fd());
    const HeaderInfo header = current_process_header(cfg.stack_depth, cfg.on_full == OnFull::Drop);
    serializer_->header(header);
    start_keeping(header);
    // Nothing could be written (a full disk, a file size limit): no empty trace is left behind.
    flush_buffer(true);
  }
  opening_ = nullptr;
  start_state_.store(opened ? kOpened : kFailed, std::memory_order_release);
  return opened;
}

// The records a finished trace ends with: what was stranded in the ring (claimed, never published),
// the live summary of a capped trace, the footer; then the zstd frame's end.
void Writer::write_ending(uint64_t stranded) {
  if (stranded) {
    drops_written_ += stranded;
    serializer_->dropped(stranded, drops_written_);
  }
  // The flight recorder's window, sealed into the trace's name (not at an exec: a failed one cuts the
  // trace back to go on).
  if (keeping() && previous_.fd() >= 0 && !output_failed_ && exec_phase_.load(std::memory_order_acquire) == kNoExec &&
      seal_at_exit())
    return;
  if (capped_ && !output_failed_) write_live_summary();
  serializer_->footer(segment_events(), drops_written_, util::monotonic_ns(), not_written_, end_);
  flush_buffer(true);
  if (!output_failed_ && !sink_->finish()) log_line(("cannot finish the trace: " + sink_->error()).c_str());
  if (!output_failed_) whole_bytes_ = file_.written();
}

// An exec asked for a checkpoint (checkpoint_for_exec): serves it until the exec failed. False when
// the thread is to end: the trace cannot be cut back (run_until_stopped finishes it as at exit), or
// the checkpoint's ending is the trace's end (`ended_`: a stop came instead of the exec's outcome).
bool Writer::serve_exec() {
  drain_once(SIZE_MAX);
  publish_devices();
  note_drops();
  serializer_->refresh_modules();
  if (!file_.can_cut_back() || output_failed_) return false;  // finished as at exit, by run()
  // The point the trace goes on from: everything written, the zstd frame ended (a decoder reads the
  // frames that follow as one text).
  flush_buffer(true);
  if (!output_failed_ && !sink_->finish()) output_failed("cannot write the trace: " + sink_->error());
  const uint64_t resume_at = file_.written();
  const uint64_t bytes_written = bytes_written_, drops_written = drops_written_;
  write_ending(shared_->ring->approx_size());
  int phase = kExecRequested;
  if (exec_phase_.compare_exchange_strong(phase, kExecCheckpointed, std::memory_order_acq_rel)) {
    // The exec replaces the image (and this thread with it), or fails and says so.
    while (exec_phase_.load(std::memory_order_acquire) == kExecCheckpointed &&
           !stop_requested_.load(std::memory_order_acquire))
      sleep_us(200);
  }
  if (exec_phase_.load(std::memory_order_acquire) != kExecResume) return !(ended_ = true);  // stopped meanwhile
  bool removed = false;
  if (!output_failed_ && !file_.cut_back_to(resume_at, &removed))
    output_failed("cannot cut the trace back after a failed exec");
  whole_bytes_ = resume_at;
  bytes_written_ = bytes_written;
  drops_written_ = drops_written;
  exec_phase_.store(kNoExec, std::memory_order_release);
  return true;
}

Writer::ExecCheckpoint Writer::checkpoint_for_exec(int timeout_ms, const ProcessEnd& end) {
  // A failed exec's resumption that did not finish in time is finished first.
  if (!wait_until([&] { return !alive() || exec_phase_.load(std::memory_order_acquire) == kNoExec; }, timeout_ms))
    return ExecCheckpoint::TimedOut;
  end_ = end;
  exec_phase_.store(kExecRequested, std::memory_order_release);
  const bool done = wait_until([&] { return !alive() || exec_phase_.load(std::memory_order_acquire) == kExecCheckpointed; },
                               timeout_ms);
  if (!done) return ExecCheckpoint::TimedOut;
  return alive() ? ExecCheckpoint::Ready : ExecCheckpoint::Finished;
}

bool Writer::wait_exec_checkpoint(int timeout_ms) {
  return wait_until([&] { return !alive() || exec_phase_.load(std::memory_order_acquire) == kExecCheckpointed; },
                    timeout_ms);
}

bool Writer::resume_after_failed_exec(int timeout_ms) {
  exec_phase_.store(kExecResume, std::memory_order_release);
  // Until the ending is cut off: a next exec (os.execvp's next PATH entry) must not find it there.
  return wait_until([&] { return !alive() || exec_phase_.load(std::memory_order_acquire) == kNoExec; }, timeout_ms);
}

void Writer::run() {
  if (!open_trace()) return;  // start() joins this thread and deletes the writer
  try {
    run_until_stopped();
  } catch (...) {
    // Out of memory (RLIMIT_AS), most likely: nothing of ours may end the process. Tracing stops with
    // one line; what was written whole stays.
    if (!output_failed_) output_failed("the writer ran out of memory");
  }
  file_.close_if_ours();
  finished_.store(true, std::memory_order_release);
}

void Writer::run_until_stopped() {
  serializer_->refresh_modules();
  flush_buffer(true);
  const Config& cfg = shared_->config;
  const uint64_t flush_interval_ns = static_cast<uint64_t>(cfg.flush_ms) * 1000000ull;
  uint64_t last_flush = util::monotonic_ns();
  uint64_t last_request_poll = last_flush;
  for (;;) {
    if (exec_phase_.load(std::memory_order_acquire) != kNoExec && !serve_exec()) break;
    if (dump_phase_.load(std::memory_order_acquire) == kDumpRequested) serve_dump();
    if (util::monotonic_ns() - last_request_poll >= kDumpRequestPollMs * 1000000ull) {
      serve_dump_request();
      last_request_poll = util::monotonic_ns();
    }
    const bool stopping = stop_requested_.load(std::memory_order_acquire);
    const bool got = drain_once(4096);
    publish_devices();
    note_drops();
    const uint64_t now = util::monotonic_ns();
    const uint64_t requested = flush_requests_.load(std::memory_order_acquire);
    const bool flush_asked = requested != flushes_done_.load(std::memory_order_relaxed);
    if (flush_asked || now - last_flush >= flush_interval_ns) {
      drain_once(SIZE_MAX);  // everything published before a flush request
      serializer_->refresh_modules();  // libraries dlopen'ed since the last flush: new module lines
      flush_buffer(true);
      // A failed allocation's flush: on the disk, not only in the kernel's cache (writer.h).
      if (durable_ticket_.load(std::memory_order_acquire) > flushes_done_.load(std::memory_order_relaxed) &&
          !output_failed_)
        file_.sync();
      last_flush = now;
      flushes_done_.store(requested, std::memory_order_release);
    }
    // After the failed allocation's flush: the program waits for that one, not for the seal.
    if (oom_pending_) seal_after_oom(now);
    if (stopping && !got) {
      // A producer may hold a ticket it has not published yet: give it a moment, then finish.
      for (int i = 0; i < 20 && shared_->ring->approx_size() > 0; ++i) {
        sleep_us(500);
        drain_once(SIZE_MAX);
      }
      break;
    }
    if (!got) sleep_us(1000);
  }
  if (ended_) return;
  // Anything still claimed but unpublished is lost: counted, so the trace says so.
  note_drops();
  write_ending(shared_->ring->approx_size());
}

}  // namespace gpumemtrace
