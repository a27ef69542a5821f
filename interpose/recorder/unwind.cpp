// interpose/recorder/unwind.cpp — native stacks: a frame-pointer walk checked call site by call site
// against DWARF, and libunwind (DWARF) wherever that walk cannot be trusted.
//
// DWARF path: unw_backtrace() is libunwind's fast path: on x86-64 it walks with a per-thread cache of
// frame descriptions and only falls back to DWARF lookup (dl_iterate_phdr, which takes the loader's
// lock) on a cache miss. We never hold a lock of our own while unwinding, so that loader lock cannot
// deadlock against us (the classic LD_PRELOAD tracer deadlock, see docs/troubleshooting.md).
//
// Frame-pointer path (x86-64, GPUMEMTRACE_UNWIND=auto): a function that keeps a frame pointer has, at
// each of its call sites, rbp = its frame, [rbp] = its caller's rbp, [rbp + 8] = its return address.
// Walking that chain costs two loads a frame. Whether a function keeps rbp so is a property of each
// call site (one module may mix such code with code that does not: a static libcudart in a program
// built with frame pointers, hand-written assembly, the C library's start-up frames), so it is decided
// per call site (a return address), and only by comparison with DWARF:
//  - learn_stack() walks the stack once with libunwind step by step, which gives every frame's return
//    address and stack pointer (sp_j, the caller's CFA), and follows the rbp chain alongside. A call
//    site keeps a frame pointer iff its frame's saved rbp + 16 == the next frame's sp (the caller's
//    return address then lies at rbp + 8, where libunwind found it). The first site that does not
//    ends the chain: the frames beyond it (the "tail", e.g. __libc_start_call_main, __libc_start_main,
//    _start) are remembered with the stack slots they were read from, keyed by that site and the stack
//    address of its frame.
//  - the walk (walk_frame_pointers) follows rbp only through sites known to keep it; at the first site
//    known not to, it appends the remembered tail if that site sits at the same stack address and
//    every remembered slot still holds the same return address; anything else (an unknown site, a
//    changed tail, a frame pointer out of bounds) falls back to DWARF for this stack.
// Memory: the walk reads only inside [stack_lo, stack_hi) of the calling thread, a range libunwind
// walked through (from our frame up to the outermost frame, stopping at signal frames and stack
// switches), and only at increasing, 8-byte aligned addresses; a corrupt rbp chain ends in a fallback,
// never in a fault. Hot path: no malloc, no lock, no system call; the tables are fixed (.bss, TLS),
// their entries single atomic words or under a sequence lock that never waits.
#define UNW_LOCAL_ONLY
#include "interpose/recorder/unwind.h"

#include <libunwind.h>
#include <link.h>

#include <atomic>

#include "interpose/recorder/event_record.h"
#include "interpose/recorder/program_strings.h"

namespace gpumemtrace {
namespace {

// Room for our own frames (hook, record_call, record, capture_native_stack) on top of the requested depth.
constexpr int kOwnFramesBudget = 8;

// Trivially destructible, initial-exec TLS throughout (hook-path TLS: no allocation on first use).
// Set around every libunwind call of this thread.
__thread bool t_in_unwinder __attribute__((tls_model("initial-exec"))) = false;

// Pages libunwind read through checked_access_mem during this thread's current unwind, confirmed
// readable. Forgotten at each unwind's start: a page may be unmapped between two.
constexpr int kReadablePages = 8;
__thread uintptr_t t_readable_pages[kReadablePages] __attribute__((tls_model("initial-exec")));
__thread int t_next_readable __attribute__((tls_model("initial-exec"))) = 0;

struct InUnwinder {
  InUnwinder() {
    t_in_unwinder = true;
    for (uintptr_t& page : t_readable_pages) page = 0;
  }
  ~InUnwinder() { t_in_unwinder = false; }
};

// libunwind's own memory check (the local address space's access_mem, for reads it is unsure of)
// writes each word into a pipe it opens in the program's descriptor table, two descriptors the
// program would see (a child listing its descriptors, a lower RLIMIT_NOFILE). Ours asks the kernel
// instead (page_readable: process_vm_readv, no descriptor), for every word libunwind reads, through a
// per-unwind cache of the pages confirmed (the stack's, the unwind tables'); the pipe is never made
// (interpose/hooks/unwinder_pipe.cpp refuses it). Writes (libunwind's register slots) are libunwind's.
using AccessMem = int (*)(unw_addr_space_t, unw_word_t, unw_word_t*, int, void*);
AccessMem g_libunwind_access_mem = nullptr;

bool readable_word(uintptr_t addr) {
  constexpr uintptr_t kPage = 4096;
  for (uintptr_t page = addr & ~(kPage - 1); page <= ((addr + sizeof(unw_word_t) - 1) & ~(kPage - 1)); page += kPage) {
    bool known = false;
    for (uintptr_t p : t_readable_pages) known |= p == page;
    if (known) continue;
    if (page == 0 || !page_readable(page)) return false;
    t_readable_pages[t_next_readable] = page;
    t_next_readable = (t_next_readable + 1) % kReadablePages;
  }
  return true;
}

int checked_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (write) return g_libunwind_access_mem(as, addr, val, write, arg);
  if (!readable_word(addr)) return -UNW_EINVAL;
  *val = *reinterpret_cast<const unw_word_t*>(addr);
  return 0;
}

std::atomic<UnwindMode> g_mode{UnwindMode::Auto};
// Set once init_unwinder() ran: before (or when it never runs), stacks have no native frames.
std::atomic<bool> g_unwinder_started{false};

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

// Copies the return addresses in `ips` to `out` from the first that is not our own code on (our
// frames lead; nobody has to filter them later). Returns the count, at most `max_depth`.
template <typename Ip>
int copy_skipping_own(const Ip* ips, int n, uintptr_t* out, int max_depth) {
  const uintptr_t lo = g_own_lo.load(std::memory_order_relaxed);
  const uintptr_t hi = g_own_hi.load(std::memory_order_relaxed);
  int first = 0;
  while (first < n) {
    const uintptr_t ip = reinterpret_cast<uintptr_t>(ips[first]);
    if (ip < lo || ip >= hi) break;
    ++first;
  }
  int count = 0;
  for (int i = first; i < n && count < max_depth; ++i) out[count++] = reinterpret_cast<uintptr_t>(ips[i]);
  return count;
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

int dwarf_stack(uintptr_t* out, int max_depth) {
  void* raw[kMaxNativeFrames + kOwnFramesBudget];
  int want = max_depth + kOwnFramesBudget;
  if (want > kMaxNativeFrames + kOwnFramesBudget) want = kMaxNativeFrames + kOwnFramesBudget;
  int n;
  {
    InUnwinder in;
    n = backtrace(raw, want);
  }
  return copy_skipping_own(raw, n, out, max_depth);
}

// ---- per-thread state ----

struct ThreadUnwind {
  // Stack memory the walk may read: proven by a DWARF walk of this thread. Empty unless lo < hi.
  uintptr_t stack_lo;
  uintptr_t stack_hi;
  // Slow walks are rationed (see learning_allowed).
  uint32_t learned;
  uint32_t fallbacks_since_learning;
  UnwindStats stats;
};
__thread ThreadUnwind t_unwind __attribute__((tls_model("initial-exec"))) = {};

#if defined(__x86_64__)

// ---- call-site verdicts ----

enum SiteVerdict : uint64_t { kSiteUnknown = 0, kSiteFramePointer = 1, kSiteNoFramePointer = 2 };

// The verdicts of the call sites seen so far, shared by every thread: buckets of 8 ways (one cache
// line), entry = ip << 2 | verdict, 0 = empty, filled in order. Each entry is one atomic word, so a
// reader sees a complete verdict or none; a full bucket overwrites one way (that site is checked again
// when next seen). Relaxed order suffices: a verdict describes code, which does not change while it is
// mapped (forget_call_sites empties the table when code is unloaded).
constexpr int kSiteWays = 8;
constexpr int kSiteBucketBits = 11;  // 16384 sites in 128 KiB of .bss, paged in as used
struct alignas(64) SiteBucket {
  std::atomic<uint64_t> way[kSiteWays];
};
SiteBucket g_sites[1 << kSiteBucketBits];

SiteBucket& bucket_of(uintptr_t ip) { return g_sites[(ip * 0x9E3779B97F4A7C15ull) >> (64 - kSiteBucketBits)]; }

inline SiteVerdict site_verdict(uintptr_t ip) {
  for (const auto& way : bucket_of(ip).way) {
    const uint64_t e = way.load(std::memory_order_relaxed);
    if ((e >> 2) == ip) return static_cast<SiteVerdict>(e & 3);
    if (e == 0) break;
  }
  return kSiteUnknown;
}

void set_site_verdict(uintptr_t ip, SiteVerdict verdict) {
  if (ip == 0 || ip >> 62) return;
  const uint64_t entry = (static_cast<uint64_t>(ip) << 2) | verdict;
  SiteBucket& bucket = bucket_of(ip);
  for (auto& way : bucket.way) {
    uint64_t e = way.load(std::memory_order_relaxed);
    if (e == 0 && way.compare_exchange_strong(e, entry, std::memory_order_relaxed)) return;
    if ((e >> 2) == ip) {
      way.store(entry, std::memory_order_relaxed);
      return;
    }
  }
  bucket.way[(ip >> 3) % kSiteWays].store(entry, std::memory_order_relaxed);
}

// ---- tails ----

// The frames beyond the first call site without a frame pointer (the tail: e.g. the C library's
// start-up frames, or a non-frame-pointer library's frames and everything above them), keyed by that
// site and the stack pointer in its frame (which makes an entry one thread's), innermost first; frame
// i was read from the stack slot at sp + slot[i]. count < 0: no usable tail there (it leaves the proven
// stack range). A direct-mapped table shared by every thread, each entry under a sequence lock: a
// writer makes `seq` odd with a CAS (a writer that finds it odd, another thread's or an interrupted
// one's, gives up: no waiting, signal-safe), a reader takes the entry only if `seq` was the same even
// number before and after reading it. Fields are relaxed atomics (plain moves on x86-64).
constexpr int kTailEntryBits = 8;
struct alignas(64) TailEntry {
  std::atomic<uint32_t> seq;
  std::atomic<int32_t> count;
  std::atomic<uintptr_t> site;
  std::atomic<uintptr_t> sp;
  std::atomic<uintptr_t> ip[kMaxNativeFrames];
  std::atomic<uint32_t> slot[kMaxNativeFrames];
};
TailEntry g_tails[1 << kTailEntryBits];  // 208 KiB of .bss, paged in as used

TailEntry& tail_entry(uintptr_t site, uintptr_t sp) {
  return g_tails[((site ^ (sp * 0x9E3779B97F4A7C15ull)) * 0xC2B2AE3D27D4EB4Full) >> (64 - kTailEntryBits)];
}

// ---- the frame-pointer walk (hot path) ----

// What the walk found. kDwarf: a site whose frames beyond are known not to be cacheable.
enum WalkResult : int { kLearn = -1, kDwarf = -2 };

// Appends the tail remembered for `site` at stack pointer `sp` if every one of its slots (below `hi`)
// still holds the same return address. Returns the new count, or a WalkResult.
inline int append_tail(ThreadUnwind& t, uintptr_t site, uintptr_t sp, uintptr_t hi, uintptr_t* out, int count,
                       int max_depth) {
  const TailEntry& e = tail_entry(site, sp);
  const uint32_t seq = e.seq.load(std::memory_order_acquire);
  if ((seq & 1) || e.site.load(std::memory_order_relaxed) != site || e.sp.load(std::memory_order_relaxed) != sp)
    return kLearn;
  const int32_t frames = e.count.load(std::memory_order_relaxed);
  if (frames < 0) return kDwarf;
  for (int i = 0; i < frames && count < max_depth; ++i) {
    const uintptr_t slot = sp + e.slot[i].load(std::memory_order_relaxed);
    const uintptr_t ip = e.ip[i].load(std::memory_order_relaxed);
    if (slot + sizeof(uintptr_t) > hi || *reinterpret_cast<const uintptr_t*>(slot) != ip) return kLearn;
    out[count++] = ip;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.seq.load(std::memory_order_relaxed) != seq) return kLearn;
  ++t.stats.tail_cache;
  return count;
}

// Walks the rbp chain up from `fp` (the frame of capture_native_stack, inside the thread's proven
// stack range [fp, hi)). Returns the frame count, or a WalkResult.
inline int walk_frame_pointers(ThreadUnwind& t, uintptr_t fp, uintptr_t hi, uintptr_t* out, int max_depth) {
  const uintptr_t own_lo = g_own_lo.load(std::memory_order_relaxed);
  const uintptr_t own_span = g_own_hi.load(std::memory_order_relaxed) - own_lo;
  const uintptr_t last_frame = hi - 2 * sizeof(uintptr_t);  // the highest fp whose 16 bytes are in range
  int count = 0;
  bool leading_own = true;
  for (int steps = 0; steps < max_depth + kOwnFramesBudget; ++steps) {
    const uintptr_t* frame = reinterpret_cast<const uintptr_t*>(fp);
    const uintptr_t ret = frame[1];
    if (!(leading_own && ret - own_lo < own_span)) {
      leading_own = false;
      out[count++] = ret;
      if (count == max_depth) return count;
    }
    const SiteVerdict verdict = site_verdict(ret);
    if (verdict == kSiteNoFramePointer) return append_tail(t, ret, fp + 2 * sizeof(uintptr_t), hi, out, count, max_depth);
    if (verdict != kSiteFramePointer) return kLearn;
    const uintptr_t next = frame[0];
    if (next == 0) return count;  // the outermost frame (DWARF agreed when the site was checked)
    if (next <= fp || next > last_frame || (next & (sizeof(uintptr_t) - 1)) != 0) return kLearn;
    fp = next;
  }
  return kLearn;
}

// ---- learning (slow path) ----

constexpr int kMaxLearnFrames = 128;
// A step between two frames larger than this is taken for a switch of stacks: the proven range ends.
constexpr uintptr_t kMaxFrameBytes = uintptr_t{64} << 20;

// Slow walks (libunwind step by step: about a microsecond a frame) are rationed per thread: the first
// 64 freely (a program's distinct call sites are learned early), then at most one every 2^k - 1
// fallbacks, k growing by one every 8 walks, up to one in 65536. In between, fallbacks use
// unw_backtrace. A thread whose stacks always fall back (their frames beyond the first site without a
// frame pointer keep changing: an interpreter's) thus pays a slow walk's ~100 us about once in 65536
// events in the long run.
bool learning_allowed(ThreadUnwind& t) {
  const uint32_t past = t.learned < 64 ? 0 : (t.learned - 64) / 8;
  const uint32_t interval = past >= 16 ? 65535 : (1u << past) - 1;
  if (t.fallbacks_since_learning >= interval) return true;
  ++t.fallbacks_since_learning;
  return false;
}

// Makes [lo, hi) the thread's proven stack range: merged with the one it has when they overlap (the
// same stack), else replacing it. A signal handler on this thread may walk between any two stores:
// the range it sees must be proven memory at every moment, so a replacement empties it first.
void prove_stack_range(ThreadUnwind& t, uintptr_t lo, uintptr_t hi) {
  if (t.stack_lo < t.stack_hi && lo <= t.stack_hi && t.stack_lo <= hi) {
    if (hi > t.stack_hi) t.stack_hi = hi;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (lo < t.stack_lo) t.stack_lo = lo;
    return;
  }
  t.stack_hi = 0;  // [anything, 0) is empty
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.stack_lo = lo;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.stack_hi = hi;
}

// Remembers frames [first, n) of a DWARF walk as the tail beyond `site` at stack pointer `sp` (at most
// kMaxNativeFrames of them: no stack uses more). Usable only when those frames are the whole rest of
// the stack (`ended`) or at least that many, and lie in the proven range (up to frame `last_proven`);
// otherwise the site is remembered as having no usable tail there, and its stacks go to DWARF without
// another slow walk.
void remember_tail(uintptr_t site, uintptr_t sp, const unw_word_t* ip, const unw_word_t* sps, int first, int n,
                   int last_proven, bool ended) {
  int32_t frames = n - first > kMaxNativeFrames ? kMaxNativeFrames : n - first;
  if ((!ended && frames < kMaxNativeFrames) || first + frames - 1 > last_proven) frames = -1;
  for (int i = 0; i < frames; ++i) {
    const uintptr_t slot = sps[first + i] - sizeof(uintptr_t);  // where libunwind read this return address
    if (slot < sp || slot - sp > UINT32_MAX) frames = -1;
  }
  TailEntry& e = tail_entry(site, sp);
  uint32_t seq = e.seq.load(std::memory_order_relaxed);
  if ((seq & 1) || !e.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_relaxed)) return;
  std::atomic_thread_fence(std::memory_order_release);
  e.site.store(site, std::memory_order_relaxed);
  e.sp.store(sp, std::memory_order_relaxed);
  e.count.store(frames, std::memory_order_relaxed);
  for (int i = 0; i < frames; ++i) {
    e.ip[i].store(ip[first + i], std::memory_order_relaxed);
    e.slot[i].store(static_cast<uint32_t>(sps[first + i] - sizeof(uintptr_t) - sp), std::memory_order_relaxed);
  }
  e.seq.store(seq + 2, std::memory_order_release);
}

// Captures the stack with libunwind step by step (every frame's return address and stack pointer),
// and learns from it: the verdict of each call site on the rbp chain from `fp0` (the frame of
// capture_native_stack), the thread's proven stack range, the tail beyond the first site without a
// frame pointer. Returns the DWARF stack, like dwarf_stack().
__attribute__((noinline, cold)) int learn_stack(ThreadUnwind& t, uintptr_t fp0, uintptr_t* out, int max_depth) {
  unw_word_t ip[kMaxLearnFrames], sp[kMaxLearnFrames];
  bool signal_frame[kMaxLearnFrames];
  int n = 0;
  bool ended = false;  // libunwind reached the outermost frame
  {
    InUnwinder in;
    unw_context_t context;
    unw_cursor_t cursor;
    if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return dwarf_stack(out, max_depth);
    while (n < kMaxLearnFrames) {
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip[n]) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp[n]) != 0) break;
      signal_frame[n] = unw_is_signal_frame(&cursor) > 0;
      ++n;
      const int step = unw_step(&cursor);
      if (step <= 0) {
        ended = step == 0;
        break;
      }
    }
  }
  if (n == 0) return dwarf_stack(out, max_depth);
  ++t.learned;
  t.fallbacks_since_learning = 0;
  ++t.stats.learned;

  // The frame of capture_native_stack's caller: its sp is capture_native_stack's CFA.
  int j = 0;
  while (j < n && sp[j] != fp0 + 2 * sizeof(uintptr_t)) ++j;
  if (j == n) return copy_skipping_own(ip, n, out, max_depth);
  const int first = j;

  // The proven range: from our frame up, while the frames go up one stack (no signal frame, no leap).
  int proven_end = first;
  while (proven_end + 1 < n && !signal_frame[proven_end] && sp[proven_end + 1] > sp[proven_end] &&
         sp[proven_end + 1] - sp[proven_end] <= kMaxFrameBytes)
    ++proven_end;
  prove_stack_range(t, fp0, sp[proven_end]);

  // Along the rbp chain. Invariant: fp + 16 == sp[j] and fp + 8 holds ip[j] (both where libunwind
  // read them), so every load below is from a slot libunwind read.
  uintptr_t fp = fp0;
  for (; j <= proven_end; ++j) {
    const uintptr_t* frame = reinterpret_cast<const uintptr_t*>(fp);
    if (frame[1] != ip[j]) break;
    const uintptr_t next = frame[0];
    if (j == proven_end) {
      // The last proven frame. Its site keeps a frame pointer only if both walks end here (the chain's
      // end is rbp == 0). Otherwise what lies beyond is nothing (the outermost frame: an empty tail)
      // or outside the proven range (beyond a signal frame: no usable tail). A walk cut short by
      // kMaxLearnFrames says nothing about it.
      if (j == n - 1 && !ended) break;
      const bool outermost = ended && j == n - 1;
      if (outermost && next == 0) {
        set_site_verdict(ip[j], kSiteFramePointer);
      } else {
        set_site_verdict(ip[j], kSiteNoFramePointer);
        remember_tail(ip[j], sp[j], ip, sp, j + 1, n, proven_end, ended);
      }
      break;
    }
    if (next + 2 * sizeof(uintptr_t) != sp[j + 1]) {
      set_site_verdict(ip[j], kSiteNoFramePointer);
      remember_tail(ip[j], sp[j], ip, sp, j + 1, n, proven_end, ended);
      break;
    }
    set_site_verdict(ip[j], kSiteFramePointer);
    fp = next;
  }
  return copy_skipping_own(ip + first, n - first, out, max_depth);
}

#endif  // __x86_64__

}  // namespace

void init_unwinder(UnwindMode mode) {
  dl_iterate_phdr(find_own_range, reinterpret_cast<void*>(&capture_native_stack));
  set_unwind_mode(mode);
  // libunwind's default cache is global and guarded by a lock (with signals masked around it); a
  // per-thread cache takes neither, which is what the hot path needs (heaptrack does the same).
  // libunwind opens its memory-validation pipe when it initialises (here): in_unwinder() refuses it.
  InUnwinder in;
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  unw_accessors_t* accessors = unw_get_accessors(unw_local_addr_space);
  if (accessors && accessors->access_mem != checked_access_mem) {
    g_libunwind_access_mem = accessors->access_mem;
    accessors->access_mem = checked_access_mem;
  }
  g_unwinder_started.store(true, std::memory_order_release);
}

void set_unwind_mode(UnwindMode mode) { g_mode.store(mode, std::memory_order_relaxed); }

bool in_unwinder() { return t_in_unwinder; }

int capture_native_stack(uintptr_t* out, int max_depth) {
  if (max_depth <= 0 || !g_unwinder_started.load(std::memory_order_relaxed)) return 0;
  ThreadUnwind& t = t_unwind;
#if defined(__x86_64__)
  if (g_mode.load(std::memory_order_relaxed) == UnwindMode::Auto) {
    const uintptr_t fp0 = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    // Explicit bounds (not one unsigned span): a signal handler replacing the range empties it first by
    // zeroing stack_hi (prove_stack_range), and [lo, 0) must read as empty.
    const uintptr_t hi = t.stack_hi;
    int n = kLearn;
    if (fp0 >= t.stack_lo && fp0 < hi) n = walk_frame_pointers(t, fp0, hi, out, max_depth);
    if (n >= 0) {
      ++t.stats.frame_pointer;
      return n;
    }
    if (n == kLearn && learning_allowed(t)) return learn_stack(t, fp0, out, max_depth);
  }
#endif
  ++t.stats.dwarf;
  return dwarf_stack(out, max_depth);
}

void forget_call_sites() {
#if defined(__x86_64__)
  for (auto& bucket : g_sites)
    for (auto& way : bucket.way) way.store(0, std::memory_order_relaxed);
#endif
}

UnwindStats unwind_stats_of_this_thread() { return t_unwind.stats; }

int call_site_verdict(uintptr_t ip) {
#if defined(__x86_64__)
  return static_cast<int>(site_verdict(ip));
#else
  (void)ip;
  return 0;
#endif
}

}  // namespace gpumemtrace
