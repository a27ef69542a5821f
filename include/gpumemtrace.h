/* include/gpumemtrace.h — report a caching allocator's sub-allocations, phase markers and scopes to gpumemtrace.
 *
 * Header-only, C and C++. Nothing to link: each function looks up the gpumemtrace library at run time
 * (dlsym) and does nothing when the program runs without it (no LD_PRELOAD), so it can stay in
 * production code. Cost without the library: one cached pointer test per call.
 *
 *   gpumemtrace_block_alloc(ptr, size, segment, device, "my_pool");  // handed out a block
 *   gpumemtrace_block_free(ptr, size, segment, device, "my_pool");   // took it back
 *   gpumemtrace_block_oom(size, device, "my_pool");                  // could not satisfy a request
 *   gpumemtrace_mark("epoch 3");                                      // phase marker
 *   gpumemtrace_scope_begin("eval"); ... gpumemtrace_scope_end("eval"); // a named scope
 *   gpumemtrace_pause(); ... gpumemtrace_resume();                    // stacks off, then on again
 *   gpumemtrace_dump(NULL, 60000, msg, sizeof msg);                   // the trace so far, sealed
 *
 * `segment` is the start of the memory obtained from CUDA (cudaMalloc) that contains the block; with
 * it, gpumem-report tells cached from leaked memory and explains fragmentation (free bytes inside
 * segments vs. the largest free block). `pool` names the allocator's pool (copied, truncated to 47
 * bytes), may be NULL. `device` is the CUDA device ordinal, or -1 when unknown.
 * Any argument is safe to pass: a device below -1 is recorded as unknown, a size or range the trace
 * format cannot hold is clamped with the exact value kept (docs/trace-format.md, "Limits"), and a
 * name is read only as far as its memory is readable (one that runs into an unmapped page is cut).
 *
 * A scope brackets a part of the run (a test, an evaluation pass) so that gpumem-report can check it
 * for leaks on its own. Scopes nest and may be opened and closed on any thread; an end closes the
 * innermost open scope with the same name. The name is copied (kept whole up to 1023 bytes).
 * Pausing (gpumemtrace_pause() to gpumemtrace_resume()) keeps recording every event, without its
 * stack: what is live, the peaks and the OOM verdicts stay exact, and the unwind, most of an event's
 * cost, is skipped (as PyTorch's snapshot keeps the blocks allocated while its history was off). Each
 * returns 1 when the state changed, 0 when it already was so, -1 when not traced.
 *
 * gpumemtrace_dump(path, timeout_ms, message, size) seals what was recorded so far into a new trace at
 * `path` (NULL: beside the trace, its name with "-dump"; compressed as the trace is, so the name ends
 * in .jsonl.zst unless GPUMEMTRACE_OUTPUT names a .jsonl), which gpumem-report reads as the trace of a
 * process still running; the trace itself goes on. Returns 0 when written, with the path in
 * `message`; 1 when not, 2 when nothing is recorded yet (no CUDA memory call so far), with why in
 * `message`; -1 when not traced. Waits at most `timeout_ms` (the copy takes as long as reading the
 * trace file). Not async-signal-safe.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef GPUMEMTRACE_H
#define GPUMEMTRACE_H

#include <dlfcn.h>
#include <stddef.h>

/* RTLD_DEFAULT is only declared with _GNU_SOURCE, which must come before the first libc header: a C
   file that included <stdio.h> first would not compile. Its value is fixed by the glibc ABI. */
#define GPUMEMTRACE_RTLD_DEFAULT_ ((void*)0)

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*gpumemtrace_block_fn)(const void* ptr, size_t size, const void* segment, int device,
                                     const char* pool);
typedef void (*gpumemtrace_oom_fn)(size_t size, int device, const char* pool);
typedef void (*gpumemtrace_mark_fn)(const char* label);
typedef void (*gpumemtrace_scope_fn)(const char* name);
typedef int (*gpumemtrace_control_fn)(void);
typedef int (*gpumemtrace_dump_fn)(const char* path, int timeout_ms, char* message, size_t size);

/* Looks `name` up once; returns NULL when gpumemtrace is not loaded. */
static inline void* gpumemtrace_lookup_(void** cache, int* looked, const char* name) {
  if (!__atomic_load_n(looked, __ATOMIC_ACQUIRE)) {
    void* fn = dlsym(GPUMEMTRACE_RTLD_DEFAULT_, name);
    __atomic_store_n(cache, fn, __ATOMIC_RELAXED);
    __atomic_store_n(looked, 1, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(cache, __ATOMIC_RELAXED);
}

/* The union turns dlsym's object pointer into a function pointer, which ISO C does not allow as a
   cast (the header compiles with -std=c11 -pedantic -Werror). */
#define GPUMEMTRACE_LOOKUP_(type, symbol)                                             \
  static void* cache_ = 0;                                                            \
  static int looked_ = 0;                                                             \
  union {                                                                             \
    void* object;                                                                     \
    type function;                                                                    \
  } fn_;                                                                              \
  fn_.object = gpumemtrace_lookup_(&cache_, &looked_, symbol)
#define GPUMEMTRACE_FORWARD_(type, symbol, ...) \
  GPUMEMTRACE_LOOKUP_(type, symbol);            \
  if (fn_.object) fn_.function(__VA_ARGS__)

static inline void gpumemtrace_block_alloc(const void* ptr, size_t size, const void* segment, int device,
                                           const char* pool) {
  GPUMEMTRACE_FORWARD_(gpumemtrace_block_fn, "gpumemtrace_report_block_alloc", ptr, size, segment, device, pool);
}

static inline void gpumemtrace_block_free(const void* ptr, size_t size, const void* segment, int device,
                                          const char* pool) {
  GPUMEMTRACE_FORWARD_(gpumemtrace_block_fn, "gpumemtrace_report_block_free", ptr, size, segment, device, pool);
}

static inline void gpumemtrace_block_oom(size_t size, int device, const char* pool) {
  GPUMEMTRACE_FORWARD_(gpumemtrace_oom_fn, "gpumemtrace_report_block_oom", size, device, pool);
}

static inline void gpumemtrace_mark(const char* label) {
  GPUMEMTRACE_FORWARD_(gpumemtrace_mark_fn, "gpumemtrace_report_mark", label);
}

static inline void gpumemtrace_scope_begin(const char* name) {
  GPUMEMTRACE_FORWARD_(gpumemtrace_scope_fn, "gpumemtrace_report_scope_begin", name);
}

static inline void gpumemtrace_scope_end(const char* name) {
  GPUMEMTRACE_FORWARD_(gpumemtrace_scope_fn, "gpumemtrace_report_scope_end", name);
}

/* As GPUMEMTRACE_FORWARD_, for a function that returns an int: `absent` without gpumemtrace. `args`
   is the parenthesised argument list (ISO C wants at least one argument for a macro's "..."). */
#define GPUMEMTRACE_RETURN_(type, symbol, absent, args) \
  GPUMEMTRACE_LOOKUP_(type, symbol);                    \
  return fn_.object ? fn_.function args : (absent)

static inline int gpumemtrace_pause(void) {
  GPUMEMTRACE_RETURN_(gpumemtrace_control_fn, "gpumemtrace_report_pause", -1, ());
}

static inline int gpumemtrace_resume(void) {
  GPUMEMTRACE_RETURN_(gpumemtrace_control_fn, "gpumemtrace_report_resume", -1, ());
}

static inline int gpumemtrace_dump(const char* path, int timeout_ms, char* message, size_t size) {
  if (message && size) message[0] = '\0';
  GPUMEMTRACE_RETURN_(gpumemtrace_dump_fn, "gpumemtrace_report_dump", -1, (path, timeout_ms, message, size));
}

#ifdef __cplusplus
}
#endif

#endif /* GPUMEMTRACE_H */
