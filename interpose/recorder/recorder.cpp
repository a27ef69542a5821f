// interpose/recorder/recorder.cpp — the recorder: lifecycle (lazy start, fork, exit) and the hot path.
//
// Lifecycle, as a state machine in g_state:
//   Uninit --first record()--> Starting --> Active --exit--> Stopped
//                                      \--> Disabled (config, unwritable output, internal failure)
//   Active --exec--> Executing --exec failed--> Active (the same trace goes on)
//   fork child: Active/Starting --> Uninit (the child starts its own trace on its first event)
//   a copy made without fork handlers (_Fork, clone): its first hook notices (fork_marker.h) and
//   passes through from then on, with one line; the parent's state is never touched from there
// Nothing is constructed before the first CUDA memory call, so a process that never makes one leaves
// no file, and no ELF constructor ordering matters ("We cannot use a static initializer because that
// leads to ordering problems of the ELF's constructors." — heapprofd).
//
// Hot path (record() once Active): clock_gettime (vDSO), the native stack (unwind.cpp: frame pointers
// checked against DWARF, else libunwind), the Python frame reader, one CAS on the ring. No malloc, no
// lock, no stdio; errno is saved and restored.
#include "interpose/recorder/recorder.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>

#include "interpose/recorder/capture_backend.h"
#include "interpose/python/python_stack.h"
#include "interpose/recorder/fork_marker.h"
#include "interpose/recorder/label_table.h"
#include "interpose/recorder/line_queue.h"
#include "interpose/recorder/pause.h"
#include "interpose/recorder/program_stderr.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/recorder/thread_check.h"
#include "interpose/recorder/unwind.h"
#include "interpose/writer/trace_file.h"
#include "interpose/writer/writer.h"
#include "util/monotonic_clock.h"
#include "util/terminal_text.h"

namespace gpumemtrace {
namespace {

enum State : int { kUninit, kStarting, kActive, kDisabled, kStopped, kExecuting };

std::atomic<int> g_state{kUninit};
RecorderShared* g_shared = nullptr;  // set once in start(); never freed (threads may still read it)
Writer* g_writer = nullptr;
pid_t g_trace_pid = 0;  // the process g_writer's trace belongs to (set in start())
// The trace's absolute path, for gpumemtrace_trace_path() (the pytest plugin reads its own trace).
// Written in start() before g_trace_pid names this process, read only after that.
char g_trace_path[4096] = "";

// Hook-path thread state: trivially destructible, initial-exec (no allocation on first access).
// depth: HookScope nesting; internal: the writer thread; tid: cached gettid() (reset in a fork child).
__thread int t_depth __attribute__((tls_model("initial-exec"))) = 0;
__thread bool t_internal __attribute__((tls_model("initial-exec"))) = false;
__thread uint32_t t_tid __attribute__((tls_model("initial-exec"))) = 0;
__thread const char* t_driver_api __attribute__((tls_model("initial-exec"))) = nullptr;
// The StackTable id of this thread's last interned stack (0: none): a repeated stack costs a compare.
__thread uint32_t t_last_stack __attribute__((tls_model("initial-exec"))) = 0;

uint32_t thread_id() {
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

// Only to the stderr the program started with (program_stderr.h): never into a file of its own that
// took descriptor 2 after it closed its stderr.
void write_stderr(const char* text, size_t size) {
  if (!stderr_is_the_programs()) return;
  const int saved = errno;
  ssize_t ignored = write(STDERR_FILENO, text, size);
  (void)ignored;
  errno = saved;
}

// Async-signal-safe: one write(2) of the parts, truncated to kLineBytes.
void write_stderr_line(std::initializer_list<const char*> parts) {
  char buf[kLineBytes];
  write_stderr(buf, format_line(buf, parts));
}

// ---- the writer thread's lines ----
// The writer thread has a descriptor table of its own whose stderr is /dev/null (writer/private_fds.h):
// its lines wait here until a program thread writes them to the program's stderr: the next one that
// records an event, asks for a flush, or finishes the trace (line_queue.h).
LineQueue g_writer_lines;
__thread bool t_queues_lines __attribute__((tls_model("initial-exec"))) = false;

void print_queued_lines() { g_writer_lines.print(write_stderr); }

// The configuration as the process environment sets it; `warn` gets each complaint about a value.
Config config_from_environment(void (*warn)(const char*)) {
  return parse_config(recorder_getenv, warn);
}

std::string exe_base_name() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "unknown";
  path[n] = '\0';
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

void disable(const char* why) {
  g_state.store(kDisabled, std::memory_order_release);
  if (why) log_line(why);
}

pthread_mutex_t g_loader_walk_mutex = PTHREAD_MUTEX_INITIALIZER;

// The status exit() was called with (the footer's exit_status), -1 until then. An ELF destructor is not
// told it; an on_exit handler is, and runs before the destructors (glibc runs exit handlers, then
// _dl_fini): registered once, at the first start, it only notes the status.
std::atomic<int> g_exit_status{-1};
void note_exit_status(int status, void*) { g_exit_status.store(status & 0xff, std::memory_order_relaxed); }

void on_fork_prepare() { pthread_mutex_lock(&g_loader_walk_mutex); }
void on_fork_parent() { pthread_mutex_unlock(&g_loader_walk_mutex); }

void on_fork_child() {
  pthread_mutex_unlock(&g_loader_walk_mutex);
  signal_flush_on_fork_child();
  // Only the forking thread exists here. The parent's writer thread is gone: forget its state (leak
  // it, its locks may be held), close its file so the child can never write into the parent's trace,
  // and let the child's first event start a trace of its own.
  t_tid = 0;
  // The parent prints the lines its writer queued; a consumer of the parent's is not here to finish.
  g_writer_lines.forget();
  const int st = g_state.load(std::memory_order_relaxed);
  if (st != kActive && st != kStarting && st != kStopped) return;
  if (g_writer) g_writer->abandon_in_fork_child();
  g_writer = nullptr;
  if (g_shared) {
    g_shared->ring->reset();
    g_shared->dropped.store(0, std::memory_order_relaxed);
    for (auto& d : g_shared->devices) d.state.store(0, std::memory_order_relaxed);
    for (auto& seen : g_shared->device_seen) seen.store(false, std::memory_order_relaxed);
  }
  g_state.store(kUninit, std::memory_order_release);
}

// Runs once per process image (and again in a fork child). Precondition: this thread won the
// Uninit -> Starting transition.
void start_recorder() {
  const int saved_errno = errno;
  static bool process_handlers_registered = false;
  if (!process_handlers_registered) {
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
    on_exit(note_exit_status, nullptr);
    process_handlers_registered = true;
  }
  if (!g_shared) {
    // Built completely before it is published: a fork from another thread may run on_fork_child()
    // at any moment, and that handler uses g_shared's ring.
    auto* shared = new (std::nothrow) RecorderShared();
    if (!shared) return disable("out of memory at start; tracing disabled");
    shared->config = config_from_environment(log_line);
    (void)parse_nvtx_mode(recorder_getenv(var::kNvtx), log_line);  // read at load time (hooks/nvtx.cpp), said here
    warn_unknown_variables(environ, log_line);  // a misspelt setting would otherwise go unnoticed
    shared->ring = new (std::nothrow) EventRing();
    if (!shared->ring || !shared->ring->init(shared->config.ring_events))
      return disable("cannot allocate the event ring; tracing disabled");
    // Without its memory, every stack travels inline in its event (as with GPUMEMTRACE_INTERN_STACKS=0).
    if (shared->config.intern_stacks) (void)shared->stacks.init();
    g_shared = shared;
  }
  const Config& cfg = g_shared->config;
  if (cfg.disabled) return disable(nullptr);

  // A seccomp filter may refuse what a new thread needs, or kill a process for a system call the
  // recorder makes (thread_check.h): then never start the writer. Probed before the unwinder's start-up,
  // whose own system calls the probe covers.
  const std::string refusal = thread_start_refusal();
  if (!refusal.empty()) {
    errno = saved_errno;
    return disable((refusal + "; running untraced").c_str());
  }
  // Native stacks need libunwind, started here (never started: capture_native_stack gives none).
  static bool unwinder_ready = false;
  if (!unwinder_ready && cfg.stack_depth > 0) {
    if (unwinder_would_be_killed()) {
      log_line("a seccomp filter kills a process that makes the mincore system call, which the unwinder needs; "
               "events are recorded without native stacks");
    } else {
      init_unwinder(cfg.unwind);
    }
    unwinder_ready = true;
  }

  // The writer thread opens the trace, in a descriptor table of its own. Never overwrite a trace (the
  // same name comes back after exec, or with pid reuse), never follow or open what someone planted at
  // a generated name: see open_trace_file().
  TraceOpening opening;
  opening.path = expand_output_path(cfg.output, getpid(), exe_base_name());
  opening.named = cfg.output_named;
  opening.streams = ProgramStreams::of_calling_thread();
  g_writer = Writer::start(g_shared, &opening);
  if (!g_writer) {
    errno = saved_errno;
    return disable((util::printable(opening.error) + "; running untraced").c_str());
  }
  g_trace_path[0] = '\0';
  char cwd[4096];
  const std::string& opened = opening.opened_path;
  if (opened.empty() || opened[0] == '/' || getcwd(cwd, sizeof cwd)) {
    const std::string full = opened.empty() || opened[0] == '/' ? opened : std::string(cwd) + "/" + opened;
    if (full.size() < sizeof g_trace_path) std::memcpy(g_trace_path, full.c_str(), full.size() + 1);
  }
  g_trace_pid = getpid();
  install_signal_flush();
  if (!opening.note.empty())  // a warning, not information: someone or something holds the expected name
    log_line(("writing trace to " + util::printable(opening.opened_path + " (" + opening.note + ")")).c_str());
  else if (says_where_its_trace_goes(cfg.verbose))
    log_info(("writing trace to " + util::printable(opening.opened_path)).c_str());
  errno = saved_errno;
  g_state.store(kActive, std::memory_order_release);
}

void start() {
  try {
    start_recorder();
  } catch (...) {
    // Out of memory (RLIMIT_AS): nothing of ours may end the process.
    disable("out of memory at start; tracing disabled");
  }
}

// The first hook of a copy of the address space made without our atfork handler (_Fork, clone
// without CLONE_VM, a raw fork): the recorder it inherited is the parent's, whose writer thread is not
// here. Starting a writer of its own is not safe in such a child (locks the parent's threads held at
// the fork stay held: malloc's, the loader's), so its hooks pass through, and it says so once.
// Async-signal-safe (the child may only be allowed that much); g_state, which a CLONE_VM child would
// share with its parent where the marker is only a pid (fork_marker.cpp), is left alone.
bool untraced_copy() {
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed)) {
    char pid[24];
    int n = 0;
    char digits[24];
    for (long p = getpid(); p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
    int at = 0;
    while (n > 0) pid[at++] = digits[--n];
    pid[at] = '\0';
    write_stderr_line({"gpumemtrace: process ", pid, " was made without fork handlers (_Fork, clone or a raw fork "
                       "system call) after tracing began; its CUDA calls are not traced"});
  }
  return false;
}

// Returns true when the recorder is active (starting it if needed). An exec under way counts as active:
// its events wait in the ring, for the image that replaces this one to drop, or for the trace to go on.
bool ensure_active() {
  int st = g_state.load(std::memory_order_acquire);
  if (st == kActive) return !copied_without_fork_handler() || untraced_copy();
  if (st == kUninit) {
    arm_fork_marker();  // before any state a copy could inherit
    if (g_state.compare_exchange_strong(st, kStarting, std::memory_order_acq_rel)) {
      start();
      const bool active = g_state.load(std::memory_order_acquire) == kActive;
      // A pause the program made before its first event (or its parent's, in a fork child) opens the
      // trace, ahead of the event being recorded.
      if (active && pause::since_ns.load(std::memory_order_relaxed)) (void)record(event::pause_marker(true));
      return active;
    }
  }
  if (copied_without_fork_handler()) return untraced_copy();
  // Another thread is starting the recorder: wait for it (start-up takes well under a second).
  while ((st = g_state.load(std::memory_order_acquire)) == kStarting) {
    if (copied_without_fork_handler()) return untraced_copy();
    sched_yield();
  }
  return st == kActive || st == kExecuting;
}

// Drains the ring and writes everything recorded so far through to the file and the disk now (the
// writer's loop notices within a millisecond), waiting at most GPUMEMTRACE_EXIT_TIMEOUT_MS.
void write_through() {
  if (g_shared) (void)flush_now(g_shared->config.exit_timeout_ms, /*durable=*/true);
}

std::atomic<bool> g_warned_label_table{false};

// The interned copy of a scope name too long for a slot's inline label (label_table.h); null when it
// fits, or when the table is full: then it is truncated like any label, and that is said once.
const char* long_scope_name(const char* name) {
  const size_t length = strnlen(name, kMaxScopeNameBytes + 1);
  if (length < static_cast<size_t>(kLabelBytes)) return nullptr;
  const size_t kept = length > kMaxScopeNameBytes ? utf8_cut(name, kMaxScopeNameBytes) : length;
  const char* interned = intern_label(name, kept);
  if (!interned && !g_warned_label_table.exchange(true, std::memory_order_relaxed))
    log_line("too many distinct long scope names; further ones are truncated to 47 bytes");
  return interned;
}

// Copies `text` into `out` (`size` bytes), truncated and NUL-terminated. Byte by byte: no libc call
// on the hot path.
void copy_truncated(char* out, const char* text, size_t size) {
  size_t i = 0;
  for (; text[i] && i < size - 1; ++i) out[i] = text[i];
  out[i] = '\0';
}

// The StackTable id of a native stack (0: it goes inline), for an event without Python frames (those
// are interned by the writer together with the native ones).
uint32_t intern_native_stack(const uintptr_t* native, int native_depth) {
  StackTable& table = g_shared->stacks;
  const uint32_t last = t_last_stack;
  if (last && table.holds(last, native, native_depth)) return last;
  const uint32_t id = table.intern(native, native_depth);
  if (id) t_last_stack = id;
  return id;
}

// `interned`: the event's label, already interned (long_scope_name), or null. `stack`: the native
// frames' StackTable id, or 0 to copy them into the record.
void fill_record(EventRecord& r, uint64_t seq, const EventFacts& f, uint64_t t, const char* interned,
                 uint32_t stack, const uintptr_t* native, int native_depth, const python::PythonFrameRef* py,
                 int python_depth) {
  r.seq = seq;
  r.time_ns = t;
  r.tid = thread_id();
  r.op = f.op;
  r.kind = f.kind;
  r.device = f.device;
  r.result = f.result;
  r.api = f.api;
  r.driver_api = f.driver_api ? f.driver_api : t_driver_api;
  r.addr = f.addr;
  r.size = f.size;
  // Optional fields only under their flag: the slot's lines that hold them stay untouched otherwise.
  uint16_t flags = 0;
  auto optional = [&](bool present, EventFlags flag, uint64_t* field, uint64_t value) {
    if (!present) return;
    flags |= flag;
    *field = value;
  };
  optional(f.has_stream, kHasStream, &r.stream, f.stream);
  optional(f.has_pool, kHasPool, &r.pool, f.pool);
  optional(f.has_segment, kHasSegment, &r.segment, f.segment);
  optional(f.has_handle, kHasHandle, &r.handle, f.handle);
  optional(f.has_meminfo, kHasMemInfo, &r.free_bytes, f.free_bytes);
  optional(f.has_meminfo, kHasMemInfo, &r.total_bytes, f.total_bytes);
  optional(f.range != 0, kHasRange, &r.range, f.range);
  optional(f.began_ns != 0, kHasBegan, &r.began_ns, f.began_ns);
  if (f.has_fraction) {
    flags |= kHasFraction;
    r.fraction = f.fraction;
  }
  if (f.has_result) flags |= kHasResult;
  if (f.size_overflow) flags |= kSizeOverflow;
  if (interned) {
    flags |= kHasLabel | kLabelInterned;
    r.interned_label = interned;
  } else if (f.label) {
    flags |= kHasLabel;
    copy_truncated(r.label, f.label, kLabelBytes);
  }
  if (f.pool_name) {
    flags |= kHasPoolName;
    copy_truncated(r.pool_name, f.pool_name, kPoolNameBytes);
  }
  if (f.time_ns && f.op != format::Op::Sync) flags |= kDelayed;  // sync's t is a promise, not a moment
  r.flags = flags;
  r.native_depth = static_cast<int16_t>(native_depth);
  r.interned_stack = stack;
  if (!stack) memcpy(r.native, native, sizeof(uintptr_t) * native_depth);
  r.python_depth = static_cast<int16_t>(python_depth);
  memcpy(r.python, py, sizeof(python::PythonFrameRef) * python_depth);
}

}  // namespace

HookScope::HookScope(HookLayer layer) noexcept {
  // Under the CUPTI backend a runtime hook must not open a scope: the CUPTI callback fired inside
  // the real call would find itself nested and record nothing.
  counted_ = layer != HookLayer::Runtime || backend::interpose_recording();
  if (!counted_) {
    recording_ = false;
    return;
  }
  recording_ = t_depth++ == 0 && !t_internal;
  if (recording_) {
    t_driver_api = nullptr;
    const int st = g_state.load(std::memory_order_relaxed);
    recording_ = st != kDisabled && st != kStopped;
  }
}

HookScope::~HookScope() noexcept {
  if (counted_) --t_depth;
}

void HookScope::note_driver_api(const char* driver_api) noexcept {
  if (t_depth > 1) t_driver_api = driver_api;
}

void mark_thread_internal() noexcept { t_internal = true; }

void lock_loader_walks() noexcept { pthread_mutex_lock(&g_loader_walk_mutex); }
void unlock_loader_walks() noexcept { pthread_mutex_unlock(&g_loader_walk_mutex); }

void stop_recording() noexcept {
  int st = kActive;
  g_state.compare_exchange_strong(st, kDisabled, std::memory_order_acq_rel);
}

bool recorder_disabled() noexcept { return g_state.load(std::memory_order_relaxed) == kDisabled; }

bool releases_keep_stacks() noexcept {
  // A question must not start the recorder (its writer thread) as a side effect: before start, the
  // setting is read the way start() will read it, with nothing said (start() warns, once).
  if (g_state.load(std::memory_order_acquire) == kActive) return g_shared->config.free_stacks;
  try {
    return config_from_environment([](const char*) {}).free_stacks;
  } catch (...) {
    return false;
  }
}

void log_line(const char* msg) noexcept {
  if (t_queues_lines) return g_writer_lines.push(msg);
  write_stderr_line({"gpumemtrace: ", msg});
}

void route_log_lines_through_program_threads() noexcept { t_queues_lines = true; }

void log_info(const char* msg) noexcept {
  if (g_shared && g_shared->config.quiet) return;
  write_stderr_line({"gpumemtrace: ", msg});
}

bool record(const EventFacts& facts) noexcept {
  if (!ensure_active()) return false;
  const int saved_errno = errno;
  const uint64_t t = facts.time_ns ? facts.time_ns : util::monotonic_ns();
  const Config& cfg = g_shared->config;
  // Releases get no stack unless asked for (like heaptrack's frees): no analysis uses where memory
  // was given back, and skipping the unwind halves the cost of an allocate/free pair. A sync marker
  // is bookkeeping of the PyTorch hook's drain thread: its stack says nothing; nor does a gc record's
  // (the pytest plugin's callback, wherever the collection happened to start).
  const bool releases = facts.op == format::Op::Free || facts.op == format::Op::BlockFree ||
                        facts.op == format::Op::Unmap || facts.op == format::Op::Unreserve;
  // Pause and resume records are bookkeeping too. While the program has paused stacks (pause.h),
  // every event goes without.
  const bool stackless = facts.op == format::Op::Sync || facts.op == format::Op::AllocatorSettings ||
                         facts.op == format::Op::Gc || facts.op == format::Op::Pause ||
                         facts.op == format::Op::Resume || (releases && !cfg.free_stacks) ||
                         pause::stackless(facts.time_ns);
  const int depth = stackless ? 0 : cfg.stack_depth;
  uintptr_t native[kMaxNativeFrames];
  python::PythonFrameRef captured[python::kMaxPythonFrames];
  int native_depth = 0, python_depth = 0;
  const python::PythonFrameRef* py = captured;
  if (facts.frame_count >= 0) {  // reported late, with its own stack: the reporter's is not wanted
    py = facts.frames;
    python_depth = depth > 0 ? std::min(facts.frame_count, python::kMaxPythonFrames) : 0;
  } else {
    native_depth = capture_native_stack(native, depth);
    if (depth > 0 && cfg.python_frames) python_depth = python::capture_python_stack(captured, python::kMaxPythonFrames);
  }

  // Interned before a ring slot is claimed: the writer waits on a claimed slot until it is filled.
  // A scope's name and an allocator settings text are kept whole (label_table.h); marks are cut.
  const bool whole = facts.op == format::Op::ScopeBegin || facts.op == format::Op::ScopeEnd ||
                     facts.op == format::Op::AllocatorSettings;
  const char* interned = whole && facts.label ? long_scope_name(facts.label) : nullptr;
  const uint32_t stack = native_depth > 0 && python_depth == 0 && cfg.intern_stacks
                             ? intern_native_stack(native, native_depth) : 0;

  EventRing& ring = *g_shared->ring;
  auto fill = [&](EventRecord& r, uint64_t seq) {
    fill_record(r, seq, facts, t, interned, stack, native, native_depth, py, python_depth);
  };
  bool pushed = ring.try_push(fill);
  if (!pushed && cfg.on_full == OnFull::Wait) {
    // Wait for room: a lost free would become a false leak. Bounded by the writer being alive; a
    // writer that stopped (exit) or died turns waiting into counted drops.
    for (unsigned spins = 0; !pushed; ++spins) {
      Writer* w = g_writer;
      if (!w || !w->alive()) break;
      // A writer that no longer exists (its process is gone: a CLONE_VM child outliving its parent)
      // drains nothing: checked now and then, never waited on.
      if (spins % 1024 == 1023 && !w->thread_exists()) break;
      if (spins < 64) {
        sched_yield();
      } else {
        timespec pause{0, 50000};  // 50 us
        nanosleep(&pause, nullptr);
      }
      pushed = ring.try_push(fill);
    }
  }
  if (!pushed) g_shared->dropped.fetch_add(1, std::memory_order_relaxed);
  // The noted driver call served this event only (not, say, the meminfo recorded after an OOM).
  t_driver_api = nullptr;
  if (g_writer_lines.waiting()) print_queued_lines();
  // An allocator's OOM reported through the custom API or PyTorch's history: in the file now (a
  // failed CUDA call is written through by record_call, after its meminfo).
  if (facts.op == format::Op::BlockOom) write_through();
  errno = saved_errno;
  return pushed;
}

void record_labelled(format::Op op, const char* label, const char* api, uint64_t range, int32_t result) noexcept {
  HookScope scope;
  if (!scope.recording()) return;
  EventFacts facts = event::mark(op, api, label);
  facts.range = range;
  facts.result = result;
  facts.has_result = result != 0;
  record(facts);
}

bool first_event_on_device(int32_t device) noexcept {
  if (device < 0 || device >= kMaxDevices || !ensure_active()) return false;
  // A plain load first: the exchange (a locked instruction) runs once per device, not per event.
  std::atomic<bool>& seen = g_shared->device_seen[device];
  return !seen.load(std::memory_order_relaxed) && !seen.exchange(true, std::memory_order_relaxed);
}

void record_meminfo(int32_t device, const char* api, uint64_t free_bytes, uint64_t total_bytes) noexcept {
  EventFacts m = event::meminfo(free_bytes, total_bytes).on_device(device);
  m.api = api;
  record(m);
}

namespace {

// First sighting of a device: its "device" line (name, total, free) and a meminfo event ("at start").
// The device facts are published before the meminfo event is recorded, so the writer has them first.
void note_device(int32_t device, const DeviceQueries& q) {
  if (!first_event_on_device(device)) return;
  uint64_t free_bytes = 0, total_bytes = 0;
  const bool have_memory = q.memory && q.memory(&free_bytes, &total_bytes);
  char name[96] = {};
  uint64_t device_total = 0;
  if (q.describe_device) q.describe_device(device, name, sizeof(name), &device_total);
  if (!device_total) device_total = total_bytes;
  if (!have_memory && !device_total) return;  // nothing to say about it
  record_device_info(device, name, device_total, free_bytes);
  if (have_memory) record_meminfo(device, q.meminfo_api, free_bytes, total_bytes);
}

}  // namespace

void record_call(EventFacts& e, const DeviceQueries& q) noexcept {
  if (e.empty) return;
  KeepErrno keep;
  resolve_device(&e, q);
  (void)record(e);
  if (e.op == format::Op::MemInfo) return;  // the program's own query: nothing to add
  const int32_t outcome = e.has_result ? e.result : kCudaSuccess;
  uint64_t free_bytes = 0, total_bytes = 0;
  if (outcome == kCudaSuccess) return note_device(e.device, q);
  if (outcome == kCudaOutOfMemory && q.memory && q.memory(&free_bytes, &total_bytes))
    record_meminfo(e.device, q.meminfo_api, free_bytes, total_bytes);  // how much was really free
  // A failed allocation is often the program's last act (CUDA_CHECK -> abort(), or a crash in its
  // error path): it and everything before it are in the file before the call returns.
  if (e.op == format::Op::Alloc || e.op == format::Op::Reserve || e.op == format::Op::Map) write_through();
}

void record_device_info(int32_t device, const char* name, uint64_t total_bytes, uint64_t free_bytes) noexcept {
  if (device < 0 || device >= kMaxDevices || !ensure_active()) return;
  DeviceInfoSlot& slot = g_shared->devices[device];
  int expected = 0;
  if (!slot.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  slot.device = device;
  size_t i = 0;
  for (; name && name[i] && i < sizeof(slot.name) - 1; ++i) slot.name[i] = name[i];
  slot.name[i] = '\0';
  slot.total_bytes = total_bytes;
  slot.free_bytes = free_bytes;
  slot.state.store(2, std::memory_order_release);
}

void finish_trace(const char* when, const ProcessEnd& end) noexcept {
  // A vfork child (or a posix_spawn one) runs in our memory, with our state and writer, but the
  // trace is its parent's, which goes on after the child's exec or _exit: leave it alone.
  if (getpid() != g_trace_pid) return;
  print_queued_lines();  // also when tracing stopped early: the writer said why
  int st = kActive;
  bool in_time = true;
  if (g_state.compare_exchange_strong(st, kStopped, std::memory_order_acq_rel)) {
    in_time = !g_writer || g_writer->stop(g_shared->config.exit_timeout_ms, end);
  } else if (st == kStopped && g_writer) {
    // An end is already under way: this call interrupted it (SIGTERM while the process is in _exit,
    // as multiprocessing's Pool.terminate() does to workers that are ending) or runs beside it on
    // another thread. Returning at once would let the caller end the process before the footer is
    // written: wait for that end's writer instead, as long as it may take (waits only on atomics).
    in_time = g_writer->wait_finished(g_shared->config.exit_timeout_ms);
  } else if (st == kExecuting && g_writer) {
    // An exec is under way (another thread, or the code this signal interrupted): its checkpoint
    // ends the trace with a footer; wait for that.
    in_time = g_writer->wait_exec_checkpoint(g_shared->config.exit_timeout_ms);
  }
  if (!in_time)
    write_stderr_line({"gpumemtrace: the writer did not finish in time ", when, "; the trace may be incomplete"});
  print_queued_lines();
}

// The thread whose exec put the recorder in Executing: only its failed exec resumes the trace (another
// thread's exec meanwhile, which found the trace checkpointed already, has nothing to resume).
__thread bool t_exec_owner __attribute__((tls_model("initial-exec"))) = false;

void recorder_before_exec() noexcept {
  // A vfork child's exec (posix_spawn's too) replaces the child, not the process the trace is of.
  if (getpid() != g_trace_pid || copied_without_fork_handler()) return;
  print_queued_lines();
  int st = kActive;
  if (!g_writer || !g_state.compare_exchange_strong(st, kExecuting, std::memory_order_acq_rel)) return;
  t_exec_owner = true;
  const Writer::ExecCheckpoint c = g_writer->checkpoint_for_exec(g_shared->config.exit_timeout_ms, ProcessEnd::exec());
  if (c == Writer::ExecCheckpoint::TimedOut)
    write_stderr_line({"gpumemtrace: the writer did not finish in time before exec; the trace may be incomplete"});
  print_queued_lines();
}

void recorder_exec_failed() noexcept {
  if (!t_exec_owner) return;
  t_exec_owner = false;
  if (g_writer->alive()) {
    // The same trace goes on: the ending the checkpoint wrote is cut off again (writer.h). Events of
    // other threads meanwhile waited in the ring.
    (void)g_writer->resume_after_failed_exec(g_shared->config.exit_timeout_ms);
    g_state.store(kActive, std::memory_order_release);
    return;
  }
  // The trace could not be cut back (a FIFO, a stream) and was finished: a new one starts.
  g_state.store(kStarting, std::memory_order_release);
  g_writer = nullptr;  // finished; leaked on purpose (a straggling producer may still read it)
  g_shared->ring->reset();
  start();
}

const char* trace_path() noexcept { return getpid() == g_trace_pid ? g_trace_path : ""; }

int64_t scope_live_bytes(const char* name) noexcept {
  if (getpid() != g_trace_pid) return -1;  // a vfork or fork child: the writer's figures are its parent's
  Writer* w = g_state.load(std::memory_order_acquire) == kActive ? g_writer : nullptr;
  return w ? w->scope_live_bytes(name) : -1;
}

int set_paused(bool pause) noexcept {
  const int st = g_state.load(std::memory_order_acquire);
  if (st == kDisabled || st == kStopped) return -1;
  if (pause) {
    uint64_t running = 0;
    if (!pause::since_ns.compare_exchange_strong(running, util::monotonic_ns(), std::memory_order_relaxed)) return 0;
  } else if (pause::since_ns.exchange(0, std::memory_order_relaxed) == 0) {
    return 0;
  }
  // Not before the recorder runs: a call that only says "paused" must not start it (the trace is
  // opened by the first CUDA memory call, which records a pause still under way: ensure_active).
  if (st == kActive && getpid() == g_trace_pid) {
    HookScope scope;
    if (scope.recording()) (void)record(event::pause_marker(pause));
  }
  return 1;
}

int dump_trace(const char* path, int timeout_ms, std::string* message) noexcept {
  try {
    const int st = g_state.load(std::memory_order_acquire);
    if (st == kDisabled || st == kStopped) {
      *message = "the recorder is off";
      return -1;
    }
    Writer* w = st == kActive && getpid() == g_trace_pid ? g_writer : nullptr;
    if (!w) {
      *message = "nothing is recorded yet: the recorder starts at the program's first CUDA memory call";
      return 2;
    }
    // The default name beside the trace, from its absolute path: the program may have changed its
    // working directory since the trace was opened.
    const std::string where = path && *path ? std::string(path)
                              : g_trace_path[0] ? tagged_path(g_trace_path, "-dump") : std::string();
    const bool done = w->dump(where, timeout_ms, message);
    print_queued_lines();
    return done ? 0 : 1;
  } catch (...) {  // out of memory: nothing of ours may end the process
    return 1;
  }
}

bool flush_now(int timeout_ms, bool durable) noexcept {
  if (getpid() != g_trace_pid) return false;  // a vfork child: the trace is the parent's
  Writer* w = g_state.load(std::memory_order_acquire) == kActive ? g_writer : nullptr;
  const bool flushed = w && w->flush(timeout_ms, durable);
  print_queued_lines();
  return flushed;
}

void drain_before_unload() noexcept {
  if (t_internal || getpid() != g_trace_pid) return;
  Writer* w = g_state.load(std::memory_order_acquire) == kActive ? g_writer : nullptr;
  if (!w) return;
  KeepErrno keep;
  (void)w->flush(kUnloadDrainMs);
}

// Flush everything at exit. An ELF destructor of a preloaded library runs after the program's atexit
// handlers and static destructors (which may still free CUDA memory, e.g. a caching allocator emptied
// at exit), so those frees are in the trace. Bounded by GPUMEMTRACE_EXIT_TIMEOUT_MS: never hang exit.
__attribute__((destructor)) void gpumemtrace_shutdown() {
  finish_trace("at exit", ProcessEnd::exited(format::End::Exit, g_exit_status.load(std::memory_order_relaxed)));
}

}  // namespace gpumemtrace

// For programs and language bindings (the PyTorch hook's SIGTERM path): see flush_now().
extern "C" __attribute__((visibility("default"))) int gpumemtrace_flush(void) {
  return gpumemtrace::flush_now(2000) ? 0 : -1;
}

// For the pytest plugin's gate (tools/python/gpumemtrace_pytest_results.py), after gpumemtrace_flush():
// the bytes allocated inside the scope that ended last, by any thread, and still live when it ended
// (interpose/writer/scope_bound.h: a bound of what gpumem-report can call its leak); -1 when that scope
// is not `name`, or nothing is known (untraced, a fork child, no scope ended yet).
extern "C" __attribute__((visibility("default"))) long long gpumemtrace_scope_live_bytes(const char* name) {
  return gpumemtrace::scope_live_bytes(name);
}

// For language bindings (the pytest plugin analyses its own trace after gpumemtrace_flush()): the
// absolute path of this process's trace, "" when it writes none (untraced, a fork child, a stream).
extern "C" __attribute__((visibility("default"))) const char* gpumemtrace_trace_path(void) {
  return gpumemtrace::trace_path();
}
