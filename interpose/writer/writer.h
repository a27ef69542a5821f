// interpose/writer/writer.h — the writer thread: drains the ring in sequence order, serializes, and
// streams the trace to its file, flushed at least every GPUMEMTRACE_FLUSH_MS (100 ms).
// Size cap (GPUMEMTRACE_MAX_BYTES): when the next event would take the trace text past the cap, one
// "capped" record is written and events stop; the ring is still drained at full speed (the program
// never waits on a capped trace), the live set is kept, and before the footer each allocation still
// live becomes one "live" record.
// Flight recorder (GPUMEMTRACE_KEEP; flight.cpp): the trace is written as rotating segments, each
// starting with a checkpoint of what the program holds; a window of the run's end is sealed into one
// trace at exit, on a dump and after an out-of-memory failure.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "interpose/writer/held_state.h"
#include "interpose/writer/live_set.h"
#include "interpose/writer/scope_bound.h"
#include "interpose/writer/serializer.h"
#include "interpose/writer/trace_file.h"

namespace gpumemtrace {

struct RecorderShared;
class Sink;

// What the writer thread is to open, and what came of it.
struct TraceOpening {
  std::string path;          // expanded (expand_output_path); a name ending in .zst selects zstd
  bool named = false;        // Config::output_named
  ProgramStreams streams;    // the program's stdout and stderr (open_trace_file)
  // Filled by Writer::start.
  std::string opened_path;   // the name taken (a numbered one when `path` was taken)
  std::string note, error;   // as open_trace_file's
};

class Writer {
 public:
  // Starts the writer thread (all signals blocked, so it never takes the program's signals), which
  // takes a descriptor table of its own (private_fds.h), opens the trace there (open_trace_file) and
  // writes its header line through to the file; returns once that is done, so that a process killed
  // right after its first CUDA call leaves a trace with its header, never an empty file. Null when the
  // trace could not be opened or the thread not started, with the reason in `opening->error`.
  static Writer* start(RecorderShared* shared, TraceOpening* opening);

  // False once the thread has finished (stopped, or its output failed), or no longer exists (the
  // process that ran it is gone: a CLONE_VM child outliving its parent): producers then stop waiting.
  // The second check is a system call: for waits, not for the hot path.
  bool alive() const { return !finished_.load(std::memory_order_acquire); }
  bool thread_exists() const;

  // Fork child: the parent's writer thread does not exist here. Closes the trace's descriptor when the
  // child's table has it (a writer that shared the program's table), so that the child can never
  // write into the parent's trace (nor keep the flight recorder's other files open).
  void abandon_in_fork_child() {
    file_.close_if_ours();
    previous_.close_if_ours();
    oom_file_.close_if_ours();
  }

  // Asks the thread to drain everything, write the footer (with `end`) and close the file; waits at
  // most `timeout_ms`. True when it finished in time. Call once. Safe from any thread, e.g. an ELF
  // destructor, and async-signal-safe (atomics and nanosleep).
  bool stop(int timeout_ms, const ProcessEnd& end);

  // Waits at most `timeout_ms` for a stop() asked before (by another thread, or by the code a signal
  // handler interrupted) to finish. True when it did. Async-signal-safe.
  bool wait_finished(int timeout_ms);

  // Asks the thread to drain, write and flush everything published so far; waits at most
  // `timeout_ms`. True when done in time. `durable`: and synced to the disk (fdatasync), for a failed
  // allocation the program may die of, which then survives a machine's crash too. Safe from any thread.
  bool flush(int timeout_ms, bool durable = false);

  // The scope that ended last, as far as the thread has drained (scope_bound.h). Any thread.
  int64_t scope_live_bytes(const char* name) const { return scope_bound_.last_ended(name); }

  // Seals what was written so far into a new, self-contained trace at `path` (""; beside the trace,
  // its name with "-dump"; a name that is taken gets a number, as the trace's own does): the thread
  // drains and writes everything, ends the zstd frame (a decoder reads the frames that follow as one
  // text), copies the file and ends the copy as a finished trace ends (the live records of a capped
  // trace, a footer with "end": "dump"). The trace itself goes on. The copy is compressed as the
  // trace is: a name that says otherwise (.zst or not) is refused. Waits at most `timeout_ms`. True
  // when done, with the path written in `*message`; false with why. One at a time: a call while
  // another's dump is under way fails. Any thread; not async-signal-safe.
  bool dump(const std::string& path, int timeout_ms, std::string* message);

  // `gpumemtrace dump PID` asks from another process (tools/dump.cpp): a request file beside the trace,
  // its name + format::kDumpRequestSuffix, holding the dump's path ("": dump()'s default). The thread looks
  // for one every kDumpRequestPollMs, takes it (a regular file of this user only, never through a
  // link), makes the dump and writes the answer beside the trace, its name + format::kDumpResultSuffix:
  // "ok PATH\n" or "error WHY\n", whole (written aside, then renamed).
  static constexpr uint64_t kDumpRequestPollMs = 200;

  // exec is about to replace the program image. The thread drains and writes everything, ends the
  // zstd frame (the point a failed exec comes back to), then writes the ending a finished trace has
  // (footer with `end`) and waits, draining nothing more, for resume_after_failed_exec(); waits at
  // most `timeout_ms` for that. Where the trace cannot be cut back (a FIFO, a stream, a file that is
  // no longer ours), the thread finishes the trace as stop() does instead, and ends.
  enum class ExecCheckpoint { Ready, Finished, TimedOut };
  ExecCheckpoint checkpoint_for_exec(int timeout_ms, const ProcessEnd& end);
  // Waits at most `timeout_ms` for a checkpoint asked for before (by the code a signal handler
  // interrupted) to be written. True when it was. Async-signal-safe.
  bool wait_exec_checkpoint(int timeout_ms);
  // The exec failed: the ending is cut off again (the file is cut back to the checkpoint) and the
  // trace goes on, the same file, the same process. Waits at most `timeout_ms` for the cut; true when
  // it was made in time. Safe from any thread.
  bool resume_after_failed_exec(int timeout_ms);

 private:
  enum StartState : int { kOpening, kOpened, kFailed };

  Writer(RecorderShared* shared, TraceOpening* opening);
  ~Writer();
  enum ExecPhase : int { kNoExec, kExecRequested, kExecCheckpointed, kExecResume };

  bool open_trace();
  void run();
  void run_until_stopped();
  bool drain_once(size_t max_records);
  void publish_devices();
  void note_drops();
  bool flush_buffer(bool sync_sink);
  void output_failed(const std::string& why);
  void write_ending(uint64_t stranded);
  bool serve_exec();
  void serve_dump();
  void serve_dump_request();
  bool write_dump(const std::string& path, std::string* message);
  bool make_whole();
  bool write_window(TraceFile* out, const ProcessEnd& end, std::string* error);
  void write_event(const EventRecord& r);
  uint32_t stack_of(const EventRecord& r);
  void write_live_summary();

  // The flight recorder (GPUMEMTRACE_KEEP; flight.cpp). The trace's name holds the segment being
  // written; its name with "-prev" the one before. Each segment is a trace of its own: the header,
  // every definition so far, then the checkpoint (what the program holds, as "initial" events), then
  // the events. The window sealed (at exit, on a dump, after an out-of-memory failure) is the previous
  // segment whole, then the current one's events after its checkpoint: every id the latter refers to
  // is defined in the former or after the checkpoint, and the checkpoint leaves the event lines'
  // deltas where the previous segment's last event line left them (flight.cpp).
  bool keeping() const { return keep_ns_ || keep_bytes_; }
  void start_keeping(const HeaderInfo& header);
  void note_kept(const EventRecord& r, uint32_t stack);  // after r was written with `stack`
  bool rotation_due(const EventRecord& r) const;
  void rotate();
  void write_checkpoint();
  bool seal_at_exit();
  void seal_after_oom(uint64_t now_ns);  // when due (at most one a second)
  // Event lines in the current segment, in the sealed window.
  uint64_t segment_events() const;
  uint64_t window_events() const;

  RecorderShared* shared_;
  TraceOpening* opening_;  // start()'s, until start_state_ leaves kOpening
  std::atomic<int> start_state_{kOpening};
  TraceFile file_;
  std::unique_ptr<Sink> sink_;  // writes to file_
  std::unique_ptr<TraceSerializer> serializer_;  // created in the thread (symbolizer start-up)
  std::string buffer_;
  bool output_failed_ = false;
  bool zstd_ = false;
  // The file's size up to which everything is whole (a line's end, a zstd block's end): where a
  // failed write cuts it back to, so that no half line or half block is left for the reader.
  uint64_t whole_bytes_ = 0;
  std::atomic<long> tid_{0};  // the thread's id (gettid), once it runs
  long owner_pid_ = 0;        // the process that started the thread
  uint64_t drops_written_ = 0;
  uint64_t max_bytes_ = 0;       // the cap on the trace text; 0: none (live_ is then not kept)
  uint64_t bytes_written_ = 0;   // trace text handed to the sink (before compression)
  bool capped_ = false;
  uint64_t not_written_ = 0;     // events consumed after the cap
  LiveSet live_;                 // kept while capped_ may come (max_bytes_) or scopes are open
  ScopeBound scope_bound_;
  std::vector<uint32_t> stack_of_interned_;  // StackTable id -> the serializer's stack id (0: not yet)
  ProcessEnd end_;  // written by stop() before stop_requested_ (release), read after it (acquire)
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> flush_requests_{0};  // flush() calls so far
  std::atomic<uint64_t> flushes_done_{0};    // requests the thread has served
  std::atomic<uint64_t> durable_ticket_{0};  // the latest request that asked to be synced to the disk
  std::atomic<bool> finished_{false};
  std::atomic<int> exec_phase_{kNoExec};
  enum DumpPhase : int { kNoDump, kDumpClaimed, kDumpRequested, kDumpDone };
  std::atomic<int> dump_phase_{kNoDump};
  std::string dump_path_;     // written by dump() before kDumpRequested (release), read by the thread
  std::string dump_message_;  // written by the thread before kDumpDone (release), read by dump()
  bool dump_written_ = false;  // as dump_message_
  bool ended_ = false;  // the trace's ending is written (an exec's checkpoint that was never resumed)

  // The flight recorder (keeping()).
  uint64_t keep_ns_ = 0, keep_bytes_ = 0;  // Config::keep_ns, keep_bytes; both 0: off
  uint64_t segment_limit_ = 0;       // keep_bytes: the trace text a segment is cut at
  HeaderInfo header_;                // the process's, written again at the top of each segment
  HeldState held_;
  std::unique_ptr<EventRecord> scratch_;  // a held event rebuilt for its checkpoint line
  std::string trace_name_;           // where the current segment is written
  TraceFile previous_;               // the previous segment (its descriptor, for the seal); fd -1: none
  uint64_t segment_text_start_ = 0;  // bytes_written_ when the current segment began
  uint64_t segment_time_start_ = 0;  // the t its checkpoint stands at
  uint64_t checkpoint_end_ = 0;      // the current segment's size after its checkpoint (a frame's end)
  uint64_t segment_events_start_ = 0, previous_events_start_ = 0;  // events_written() when each began
  uint64_t checkpoint_events_ = 0;   // event lines of the current segment's checkpoint
  bool oom_pending_ = false;         // an out-of-memory failure since the last seal of one
  uint64_t last_oom_seal_ns_ = 0;
  TraceFile oom_file_;               // the last window sealed after an out-of-memory failure
};

}  // namespace gpumemtrace
