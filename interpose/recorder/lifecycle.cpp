// interpose/recorder/lifecycle.cpp — the recorder's lifecycle: lazy start, fork handlers, exec, exit,
// flushes and dumps; the states are drawn in lifecycle.h.
//
// Nothing is constructed before the first CUDA memory call, so a process that never makes one leaves
// no file, and no ELF constructor ordering matters ("We cannot use a static initializer because that
// leads to ordering problems of the ELF's constructors." — heapprofd). The event path (recorder.cpp)
// asks ensure_active() once per hook call; everything else here runs off the hot path.
#include "interpose/recorder/lifecycle.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>

#include "interpose/recorder/fork_marker.h"
#include "interpose/recorder/pause.h"
#include "interpose/recorder/program_stderr.h"
#include "interpose/recorder/program_strings.h"
#include "interpose/recorder/recorder.h"
#include "interpose/recorder/thread_check.h"
#include "interpose/recorder/unwind.h"
#include "interpose/writer/trace_file.h"
#include "interpose/writer/writer.h"
#include "util/monotonic_clock.h"
#include "util/terminal_text.h"

namespace gpumemtrace {

std::atomic<int> g_state{kUninit};

namespace {

RecorderShared* g_shared = nullptr;  // set once in start(); never freed (threads may still read it)
Writer* g_writer = nullptr;
pid_t g_trace_pid = 0;  // the process g_writer's trace belongs to (set in start())
// The trace's absolute path, for gpumemtrace_trace_path() (the pytest plugin reads its own trace).
// Written in start() before g_trace_pid names this process, read only after that.
char g_trace_path[4096] = "";

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

}  // namespace

// ---- the writer thread's lines ----
// The writer thread has a descriptor table of its own whose stderr is /dev/null (writer/private_fds.h):
// its lines wait here until a program thread writes them to the program's stderr: the next one that
// records an event, asks for a flush, or finishes the trace (line_queue.h).
LineQueue g_writer_lines;

void print_queued_lines() noexcept { g_writer_lines.print(write_stderr); }

namespace {

__thread bool t_queues_lines __attribute__((tls_model("initial-exec"))) = false;  // the writer thread's

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
  forget_thread_id();
  forget_pid();
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
void say_untraced_copy() {
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
}

}  // namespace

RecorderShared* ensure_active() noexcept {
  int st = g_state.load(std::memory_order_acquire);
  if (st == kActive) {
    if (!copied_without_fork_handler()) return g_shared;
    say_untraced_copy();
    return nullptr;
  }
  if (st == kUninit) {
    arm_fork_marker();  // before any state a copy could inherit
    if (g_state.compare_exchange_strong(st, kStarting, std::memory_order_acq_rel)) {
      start();
      if (g_state.load(std::memory_order_acquire) != kActive) return nullptr;
      // A pause the program made before its first event (or its parent's, in a fork child) opens the
      // trace, ahead of the event being recorded.
      if (pause::since_ns.load(std::memory_order_relaxed)) (void)record(event::pause_marker(true));
      return g_shared;
    }
  }
  if (copied_without_fork_handler()) {
    say_untraced_copy();
    return nullptr;
  }
  // Another thread is starting the recorder: wait for it (start-up takes well under a second).
  while ((st = g_state.load(std::memory_order_acquire)) == kStarting) {
    if (copied_without_fork_handler()) {
      say_untraced_copy();
      return nullptr;
    }
    sched_yield();
  }
  return st == kActive || st == kExecuting ? g_shared : nullptr;
}

Writer* current_writer() noexcept { return g_writer; }

// The writer's loop notices within a millisecond.
void write_through() noexcept {
  if (g_shared) (void)flush_now(g_shared->config.exit_timeout_ms, /*durable=*/true);
}

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
  if (thread_is_internal() || getpid() != g_trace_pid) return;
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
