// interpose/recorder/unwind.cpp — native stacks with libunwind.
//
// unw_backtrace() is libunwind's fast path: on x86-64 it walks with a per-thread cache of frame
// descriptions and only falls back to DWARF lookup (dl_iterate_phdr, which takes the loader's lock) on
// a cache miss. We never hold a lock of our own while unwinding, so that loader lock cannot deadlock
// against us (the classic LD_PRELOAD tracer deadlock, see docs/troubleshooting.md).
#define UNW_LOCAL_ONLY
#include "interpose/recorder/unwind.h"

#include <libunwind.h>
#include <link.h>

#include <atomic>

#include "interpose/recorder/event_record.h"

namespace gpumemtrace {
namespace {

// Set around unw_backtrace on the calling thread (trivially destructible, as hook-path TLS must be).
thread_local bool t_in_unwinder = false;

// [lo, hi) of this library's executable segments. Written once on start-up, read on the hot path.
std::atomic<uintptr_t> g_own_lo{0}, g_own_hi{0};

int find_own_range(dl_phdr_info* info, size_t, void* data) {
  const uintptr_t probe = reinterpret_cast<uintptr_t>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (start < lo) lo = start;
    if (start + ph.p_memsz > hi) hi = start + ph.p_memsz;
  }
  if (probe < lo || probe >= hi) return 0;
  g_own_lo.store(lo, std::memory_order_relaxed);
  g_own_hi.store(hi, std::memory_order_relaxed);
  return 1;
}

#if defined(__SANITIZE_THREAD__)
// make tsan only. unw_backtrace keeps a per-thread cache that a thread-exit destructor frees in the
// last round of destructors, after GCC's ThreadSanitizer runtime has finished the thread: the
// destructor's lock then crashes inside the runtime (a 10-line program with libunwind alone does it;
// clang's runtime does not). Stepping frame by frame keeps no such cache: the same frames, slower.
int backtrace(void** out, int max) {
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return 0;
  int n = 0;
  do {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    out[n++] = reinterpret_cast<void*>(ip);
  } while (n < max && unw_step(&cursor) > 0);
  return n;
}
#else
int backtrace(void** out, int max) { return unw_backtrace(out, max); }
#endif

}  // namespace

void init_own_code_range() {
  dl_iterate_phdr(find_own_range, reinterpret_cast<void*>(&capture_native_stack));
  // libunwind's default cache is global and guarded by a lock (with signals masked around it); a
  // per-thread cache takes neither, which is what the hot path needs (heaptrack does the same).
  // libunwind opens its memory-validation pipe when it initialises (here): in_unwinder() moves it.
  t_in_unwinder = true;
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  t_in_unwinder = false;
}

bool in_unwinder() { return t_in_unwinder; }

int capture_native_stack(uintptr_t* out, int max_depth) {
  if (max_depth <= 0) return 0;
  // Room for our own frames (hook, record, this function) on top of the requested depth.
  constexpr int kOwnFramesBudget = 8;
  void* raw[kMaxNativeFrames + kOwnFramesBudget];
  int want = max_depth + kOwnFramesBudget;
  if (want > kMaxNativeFrames + kOwnFramesBudget) want = kMaxNativeFrames + kOwnFramesBudget;
  t_in_unwinder = true;
  const int n = backtrace(raw, want);
  t_in_unwinder = false;
  const uintptr_t lo = g_own_lo.load(std::memory_order_relaxed);
  const uintptr_t hi = g_own_hi.load(std::memory_order_relaxed);
  int first = 0;
  // Skip the internal frames so that nobody has to filter them later.
  while (first < n) {
    const uintptr_t ip = reinterpret_cast<uintptr_t>(raw[first]);
    if (ip < lo || ip >= hi) break;
    ++first;
  }
  int count = 0;
  for (int i = first; i < n && count < max_depth; ++i) out[count++] = reinterpret_cast<uintptr_t>(raw[i]);
  return count;
}

}  // namespace gpumemtrace
