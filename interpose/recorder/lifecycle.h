// interpose/recorder/lifecycle.h — the recorder's lifecycle (lifecycle.cpp) as its event path
// (recorder.cpp) sees it, and the little the lifecycle asks of the event path. Internal to
// interpose/recorder/; hooks use recorder.h only.
//
// The lifecycle is a state machine in g_state:
//   Uninit --first event--> Starting --> Active --exit--> Stopped
//                                    \--> Disabled (config, unwritable output, internal failure)
//   Active --exec--> Executing --exec failed--> Active (the same trace goes on)
//   fork child: Active/Starting --> Uninit (the child starts its own trace on its first event)
//   a copy made without fork handlers (_Fork, clone): its first hook notices (fork_marker.h) and
//   passes through from then on, with one line; the parent's state is never touched from there
//
// The event path asks ensure_active() once per hook call and works on what it returns from then on.
// Thread-safety: as recorder.h; the states change only in lifecycle.cpp.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/recorder/line_queue.h"
#include "interpose/recorder/recorder_state.h"

namespace gpumemtrace {

class Writer;

enum RecorderStateValue : int { kUninit, kStarting, kActive, kDisabled, kStopped, kExecuting };

// The recorder's state, a RecorderStateValue. Every hook reads it (HookScope, relaxed).
extern std::atomic<int> g_state;

// The recorder's shared state when it is active (starting it if needed: the first CUDA memory call
// does), null when it is not: disabled, stopped, or this process is a copy made without fork
// handlers. An exec under way counts as active: its events wait in the ring, for the image that
// replaces this one to drop, or for the trace to go on. Keeps errno.
// The returned state is never freed, so a hook may use it to the end of its call: should the trace end
// meanwhile (another thread's exit), its events race that end as any event racing it always could,
// between this check and the ring.
RecorderShared* ensure_active() noexcept;

// The writer thread draining the ring, null when there is none (a fork child before its first event,
// a failed exec's restart); read afresh at each use: a failed exec replaces it.
Writer* current_writer() noexcept;

// Drains the ring and writes everything recorded so far through to the file and the disk now,
// waiting at most GPUMEMTRACE_EXIT_TIMEOUT_MS: a failed allocation is often the program's last act.
void write_through() noexcept;

// Lines the writer thread logged, waiting for a program thread to write them to the program's stderr:
// every event's path checks `waiting()` (two relaxed loads) and prints them.
extern LineQueue g_writer_lines;
void print_queued_lines() noexcept;

// ---- what the lifecycle asks of the event path (recorder.cpp) ----

// In a fork child: the forking thread's cached thread id is its parent's.
void forget_thread_id() noexcept;

// True on the writer thread (mark_thread_internal): nothing it does is recorded or waited for.
bool thread_is_internal() noexcept;

}  // namespace gpumemtrace
