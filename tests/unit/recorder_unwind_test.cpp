// tests/unit/recorder_unwind_test.cpp — the frame-pointer walk (GPUMEMTRACE_UNWIND=auto) against
// libunwind (dwarf): the same stacks through code with frame pointers, through a library without them,
// from several threads, from a signal handler on its own stack; no fault on a corrupt rbp chain.
//
// The frames under test live in two libraries (tests/unit/support): libgmt_fp_frames.so (frame
// pointers) and libgmt_nofp_frames.so (-fomit-frame-pointer). The recorder is linked into this test
// binary, so its leading frames (which capture_native_stack skips as its own) are this binary's; the
// libraries' frames are what the stacks show first. The frame-pointer walk exists on x86-64 only.
#if defined(__x86_64__)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "interpose/recorder/event_record.h"
#include "interpose/recorder/unwind.h"

extern "C" {
void gmt_fp_descend(int frames, void (*fn)(void*), void* arg);
void gmt_call_with_rbp(uintptr_t rbp_value, void (*fn)(void*), void* arg);
void gmt_nofp_call(void (*fn)(void*), void* arg);
void gmt_nofp_call_scrambled(void (*fn)(void*), void* arg);
}

namespace gpumemtrace {
namespace {

using Stack = std::vector<uintptr_t>;

// One capture per mode, from the same call site (so the innermost frame is the same too).
struct Captures {
  Stack auto_mode, dwarf_mode;
};

__attribute__((noinline)) void capture_both(void* arg) {
  auto* c = static_cast<Captures*>(arg);
  for (UnwindMode mode : {UnwindMode::Auto, UnwindMode::Dwarf}) {
    set_unwind_mode(mode);
    uintptr_t frames[kMaxNativeFrames];
    const int n = capture_native_stack(frames, kMaxNativeFrames);
    (mode == UnwindMode::Auto ? c->auto_mode : c->dwarf_mode).assign(frames, frames + n);
  }
  set_unwind_mode(UnwindMode::Auto);
}

std::string symbol_of(uintptr_t ip) {
  Dl_info info;
  return dladdr(reinterpret_cast<void*>(ip - 1), &info) && info.dli_sname ? info.dli_sname : "?";
}

int count_of(const Stack& s, const std::string& name) {
  int n = 0;
  for (uintptr_t ip : s) n += symbol_of(ip) == name;
  return n;
}

// The frame of `name` in `s` (its return address), or 0.
uintptr_t frame_of(const Stack& s, const std::string& name) {
  for (uintptr_t ip : s)
    if (symbol_of(ip) == name) return ip;
  return 0;
}

class Unwind : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { init_unwinder(UnwindMode::Auto); }
};

// Starts `body` on a thread of its own (a fresh per-thread state: stack range, rationing of slow
// walks); wait() returns when it is done. The thread then stays parked until the process exits rather
// than ending: under ThreadSanitizer, libunwind's thread-exit destructor (uninstrumented) locks a mutex
// through TSan's interceptor after TSan has let go of the thread, and crashes.
class ParkedThread {
 public:
  template <typename Body>
  explicit ParkedThread(Body body) {
    std::thread([this, body] {
      body();
      done_.store(true, std::memory_order_release);
      for (;;) pause();
    }).detach();
  }
  void wait() const {
    while (!done_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

 private:
  std::atomic<bool> done_{false};
};

template <typename Body>
void in_new_thread(Body body) {
  ParkedThread(body).wait();
}

// Through code that keeps frame pointers: the walk alone gives libunwind's stack once each call site
// has been checked (the first capture), including the cached frames beyond the first frame without a
// frame pointer (gtest's, the C library's start-up).
TEST_F(Unwind, FramePointerWalkEqualsLibunwindWhereFramesKeepFramePointers) {
  in_new_thread([] {
  for (int round = 0; round < 4; ++round) {
    const UnwindStats before = unwind_stats_of_this_thread();
    Captures c;
    gmt_fp_descend(20, capture_both, &c);
    const UnwindStats after = unwind_stats_of_this_thread();
    ASSERT_EQ(c.auto_mode, c.dwarf_mode) << "round " << round;
    EXPECT_EQ(count_of(c.auto_mode, "gmt_fp_descend"), 20);
    if (round > 0) {  // checked by now: the walk did it alone, with the cached tail
      EXPECT_EQ(after.frame_pointer, before.frame_pointer + 1) << "round " << round;
      EXPECT_EQ(after.tail_cache, before.tail_cache + 1) << "round " << round;
      EXPECT_EQ(after.learned, before.learned) << "round " << round;
    }
    EXPECT_EQ(call_site_verdict(frame_of(c.auto_mode, "gmt_fp_descend")), 1);
  }
  });
}

struct DepthCaptures {
  int depth;
  Captures captures;
};

__attribute__((noinline)) void capture_both_at_depth(void* arg) {
  auto* d = static_cast<DepthCaptures*>(arg);
  for (UnwindMode mode : {UnwindMode::Auto, UnwindMode::Dwarf}) {
    set_unwind_mode(mode);
    uintptr_t frames[kMaxNativeFrames];
    const int n = capture_native_stack(frames, d->depth);
    (mode == UnwindMode::Auto ? d->captures.auto_mode : d->captures.dwarf_mode).assign(frames, frames + n);
  }
  set_unwind_mode(UnwindMode::Auto);
}

// The depth limit cuts both walks at the same frame.
TEST_F(Unwind, DepthLimitCutsBothTheSame) {
  DepthCaptures whole{kMaxNativeFrames, {}};
  gmt_fp_descend(30, capture_both_at_depth, &whole);
  ASSERT_GT(whole.captures.dwarf_mode.size(), 30u);
  for (int depth : {1, 5, 23, 30, 31, kMaxNativeFrames}) {
    for (int round = 0; round < 2; ++round) {  // the first may check call sites, the second walks
      DepthCaptures d{depth, {}};
      gmt_fp_descend(30, capture_both_at_depth, &d);
      EXPECT_EQ(d.captures.auto_mode, d.captures.dwarf_mode) << depth;
      EXPECT_EQ(d.captures.auto_mode.size(), std::min<size_t>(depth, whole.captures.dwarf_mode.size()));
    }
  }
}

struct Nested {
  void (*call)(void (*)(void*), void*);  // the library function without frame pointers
  Captures captures;
};

void descend_then_capture(void* arg) { gmt_fp_descend(3, capture_both, &static_cast<Nested*>(arg)->captures); }

void call_without_frame_pointers(void* arg) {
  auto* n = static_cast<Nested*>(arg);
  n->call(descend_then_capture, n);
}

// A library without frame pointers between frames that keep them: its call site is known not to keep
// one, the walk stops there and libunwind's stack comes out (the frames beyond it from the cache once
// they are known), never the rbp chain's (which skips the frame, or leads nowhere).
TEST_F(Unwind, FallsBackOnAModuleWithoutFramePointers) {
  for (auto call : {&gmt_nofp_call, &gmt_nofp_call_scrambled}) {
    const std::string name = call == &gmt_nofp_call ? "gmt_nofp_call" : "gmt_nofp_call_scrambled";
    for (int round = 0; round < 3; ++round) {
      const UnwindStats before = unwind_stats_of_this_thread();
      Nested nested{call, {}};
      gmt_fp_descend(2, call_without_frame_pointers, &nested);
      const UnwindStats after = unwind_stats_of_this_thread();
      const Captures& c = nested.captures;
      ASSERT_EQ(c.auto_mode, c.dwarf_mode) << name << " round " << round;
      if (round > 0) {  // the walk up to that library's frame, then the cached frames beyond it
        EXPECT_EQ(after.frame_pointer, before.frame_pointer + 1) << name << " round " << round;
        EXPECT_EQ(after.tail_cache, before.tail_cache + 1) << name << " round " << round;
        EXPECT_EQ(after.learned, before.learned) << name << " round " << round;
      }
      EXPECT_EQ(count_of(c.auto_mode, "gmt_fp_descend"), 5) << name;
      EXPECT_EQ(count_of(c.auto_mode, name), 1) << name;
      EXPECT_EQ(call_site_verdict(frame_of(c.auto_mode, name)), 2) << name;
    }
  }
}

// Memory the walk must never fault on: a page with no access, above the stack.
uintptr_t inaccessible_page() {
  static void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return reinterpret_cast<uintptr_t>(page);
}

struct Planted {
  uintptr_t rbp;
  Captures captures;
};

void capture_with_planted_rbp(void* arg) {
  auto* p = static_cast<Planted*>(arg);
  gmt_call_with_rbp(p->rbp, capture_both, &p->captures);
}

// A call site checked as keeping a frame pointer, then reached with a bad one: every bad value ends
// the walk and libunwind's stack comes out; a fake chain planted on the stack comes out as it says
// (wrong frames, like any frame-pointer unwinder's), but nothing faults.
TEST_F(Unwind, CorruptFramePointerChainNeverFaults) {
  in_new_thread([] {
    // The trampoline's call site, checked with a good rbp each time (a bad one makes it "no frame
    // pointer" when the fallback checks it again), so that the walk follows the planted one.
    auto trust_trampoline = [] {
      forget_call_sites();
      Planted good{0, {}};
      gmt_fp_descend(2, capture_with_planted_rbp, &good);
      EXPECT_EQ(good.captures.auto_mode, good.captures.dwarf_mode);
      const uintptr_t site = frame_of(good.captures.dwarf_mode, "gmt_call_with_rbp");
      EXPECT_EQ(call_site_verdict(site), 1);
      return site;
    };
    void* heap = malloc(64);
    const uintptr_t local = reinterpret_cast<uintptr_t>(&heap);
    const uintptr_t bad_values[] = {
        8,                            // the null page
        local + 3,                    // misaligned, on the stack
        local - 4096,                 // below the frame that holds it (the chain must go up)
        reinterpret_cast<uintptr_t>(heap),
        inaccessible_page(),
        inaccessible_page() + 4096 - 8,
        UINTPTR_MAX - 7,
        uintptr_t{0x00007ff0deadbee0},
    };
    for (uintptr_t bad : bad_values) {
      trust_trampoline();
      Planted planted{bad, {}};
      gmt_fp_descend(2, capture_with_planted_rbp, &planted);
      EXPECT_EQ(planted.captures.auto_mode, planted.captures.dwarf_mode) << std::hex << bad;
    }
    free(heap);

    // Fake frames in this function's own stack memory (inside the proven range), each saying it was
    // called from the trampoline's trusted site: a chain that ends on the inaccessible page, one that
    // loops, one that ends (rbp 0). The walk stops or returns what it read; nothing faults.
    alignas(16) uintptr_t fake[6];
    const uintptr_t starts[] = {reinterpret_cast<uintptr_t>(&fake[0]), reinterpret_cast<uintptr_t>(&fake[4])};
    for (int ends : {0, 1}) {
      for (uintptr_t start : starts) {
        const uintptr_t site = trust_trampoline();
        fake[0] = reinterpret_cast<uintptr_t>(&fake[2]), fake[1] = site;
        fake[2] = ends ? 0 : inaccessible_page(), fake[3] = site;
        fake[4] = reinterpret_cast<uintptr_t>(&fake[4]), fake[5] = site;
        asm volatile("" : : "r"(fake) : "memory");
        Planted planted{start, {}};
        gmt_fp_descend(2, capture_with_planted_rbp, &planted);
        EXPECT_FALSE(planted.captures.auto_mode.empty());
      }
    }
  });
}

// Several threads at once share the call-site verdicts and the tails; each its own stack range.
TEST_F(Unwind, ThreadsAgreeWithLibunwind) {
  std::vector<std::unique_ptr<ParkedThread>> threads;
  std::vector<int> mismatches(4, 0), fast(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.push_back(std::make_unique<ParkedThread>([&, t] {
      for (int i = 0; i < 200; ++i) {
        Captures c;
        gmt_fp_descend(5 + (i + t) % 7, capture_both, &c);
        mismatches[t] += c.auto_mode != c.dwarf_mode;
      }
      fast[t] = static_cast<int>(unwind_stats_of_this_thread().frame_pointer);
    }));
  for (auto& th : threads) th->wait();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
    EXPECT_GT(fast[t], 150) << "thread " << t;
  }
}

// Captured in the signal handler into fixed arrays (a handler must not allocate), turned into Captures
// afterwards.
struct SignalCaptures {
  uintptr_t frames[2][kMaxNativeFrames];
  int count[2];
};
SignalCaptures g_signal_captures;

__attribute__((noinline)) void capture_both_in_handler(void*) {
  for (UnwindMode mode : {UnwindMode::Auto, UnwindMode::Dwarf}) {
    set_unwind_mode(mode);
    const int m = mode == UnwindMode::Auto ? 0 : 1;
    g_signal_captures.count[m] = capture_native_stack(g_signal_captures.frames[m], kMaxNativeFrames);
  }
  set_unwind_mode(UnwindMode::Auto);
}

void capture_in_handler(int) { gmt_fp_descend(3, capture_both_in_handler, nullptr); }

void raise_usr1(void*) { raise(SIGUSR1); }

// In a signal handler running on its own stack (sigaltstack): the stack range learned for the thread's
// stack does not cover it; the stack crosses the signal frame exactly as libunwind's does.
TEST_F(Unwind, SignalHandlerOnAlternateStack) {
  in_new_thread([] {
  const size_t size = 1 << 16;
  void* alt = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(alt, MAP_FAILED);
  stack_t ss{}, old_ss{};
  ss.ss_sp = alt;
  ss.ss_size = size;
  ASSERT_EQ(sigaltstack(&ss, &old_ss), 0);
  struct sigaction sa{}, old_sa{};
  sa.sa_handler = capture_in_handler;
  sa.sa_flags = SA_ONSTACK;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_sa), 0);
  for (int round = 0; round < 3; ++round) {
    g_signal_captures = {};
    gmt_fp_descend(4, raise_usr1, nullptr);
    const SignalCaptures& sc = g_signal_captures;
    const Captures c{Stack(sc.frames[0], sc.frames[0] + sc.count[0]), Stack(sc.frames[1], sc.frames[1] + sc.count[1])};
    EXPECT_EQ(c.auto_mode, c.dwarf_mode) << "round " << round;
    EXPECT_EQ(count_of(c.auto_mode, "gmt_fp_descend"), 7) << "round " << round;  // 3 in the handler, 4 below
  }
  sigaction(SIGUSR1, &old_sa, nullptr);
  sigaltstack(&old_ss, nullptr);
  munmap(alt, size);
  });
}

// forget_call_sites() (dlclose) empties the verdicts; the next capture checks again and agrees.
TEST_F(Unwind, ForgottenCallSitesAreCheckedAgain) {
  in_new_thread([] {
  Captures c;
  gmt_fp_descend(4, capture_both, &c);
  const uintptr_t site = frame_of(c.auto_mode, "gmt_fp_descend");
  ASSERT_EQ(call_site_verdict(site), 1);
  forget_call_sites();
  EXPECT_EQ(call_site_verdict(site), 0);
  Captures again;
  gmt_fp_descend(4, capture_both, &again);
  EXPECT_EQ(again.auto_mode, again.dwarf_mode);
  EXPECT_EQ(call_site_verdict(site), 1);
  });
}

}  // namespace
}  // namespace gpumemtrace

#endif  // __x86_64__
