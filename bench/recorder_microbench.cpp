// bench/recorder_microbench.cpp — Google Benchmark: the recorder's hot path and ring throughput.
//   HookPath/20: unwind 20 frames + intern the stack + push into the ring (a consumer thread drains
//   it), per event, as record() does.
//   Unwind/20: the stack capture alone (GPUMEMTRACE_UNWIND=auto: frame pointers checked against DWARF);
//   UnwindDwarf/20: libunwind alone (GPUMEMTRACE_UNWIND=dwarf).
//   InternStack/20: interning a 20-frame stack seen before (the per-thread last id does not match).
//   RingPush/threads:N: ring push with N producers and one consumer.
//   SerializeEvent: the writer thread's per-event work (not the hook thread's).
//   Clock: the event's timestamp alone (clock_gettime(CLOCK_MONOTONIC), vDSO).
//   RecordCall/20: the recorder's whole event path as a CUDA hook enters it (HookScope, record_call),
//   per event: an allocation 20 frames deep with its stack, then a free without, into a started
//   recorder whose writer thread drains the ring into /dev/null. No CUDA here: the device query is a
//   stub, and the real call (cudaMalloc) is not made. Runs last: the writer thread it starts stays.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "interpose/recorder/event_record.h"
#include "interpose/recorder/recorder.h"
#include "interpose/recorder/ring.h"
#include "interpose/recorder/stack_table.h"
#include "interpose/recorder/unwind.h"
#include "interpose/writer/serializer.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
namespace {

// One consumer draining the ring for the duration of a benchmark.
struct Drainer {
  Ring<EventRecord> ring;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> consumed{0};
  std::thread thread;
  explicit Drainer(size_t capacity) {
    if (!ring.init(capacity)) abort();
    thread = std::thread([this] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (ring.peek()) {
          ring.pop();
          consumed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  ~Drainer() {
    stop = true;
    thread.join();
  }
};

Drainer* g_drainer = nullptr;

template <typename F>
__attribute__((noinline)) void at_depth(int depth, F&& f) {
  if (depth <= 1) {
    f();
  } else {
    at_depth(depth - 1, f);
  }
  benchmark::ClobberMemory();
}

// `stack`: the stack's StackTable id, or 0 to copy the frames into the slot.
void push_event(const uintptr_t* ips, int n, uint32_t stack = 0) {
  while (!g_drainer->ring.try_push([&](EventRecord& r, uint64_t seq) {
    r.seq = seq;
    r.native_depth = static_cast<int16_t>(n);
    r.interned_stack = stack;
    if (!stack) memcpy(r.native, ips, sizeof(uintptr_t) * n);
  })) {
  }
}

StackTable& stack_table() {
  static StackTable* table = [] {
    auto* t = new StackTable();
    if (!t->init()) abort();
    return t;
  }();
  return *table;
}

void BM_HookPath(benchmark::State& state) {
  Drainer drainer(16384);
  g_drainer = &drainer;
  init_unwinder(UnwindMode::Auto);
  StackTable& table = stack_table();
  const int depth = static_cast<int>(state.range(0));
  at_depth(depth, [&] {
    uint32_t last = 0;
    for (auto _ : state) {
      uintptr_t ips[kMaxNativeFrames];
      const int n = capture_native_stack(ips, 64);
      if (!(last && table.holds(last, ips, n))) last = table.intern(ips, n);
      push_event(ips, n, last);
    }
  });
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HookPath)->Arg(20);

void unwind_benchmark(benchmark::State& state, UnwindMode mode) {
  init_unwinder(mode);
  at_depth(static_cast<int>(state.range(0)), [&] {
    for (auto _ : state) {
      uintptr_t ips[kMaxNativeFrames];
      benchmark::DoNotOptimize(capture_native_stack(ips, 64));
    }
  });
  init_unwinder(UnwindMode::Auto);
}
void BM_Unwind(benchmark::State& state) { unwind_benchmark(state, UnwindMode::Auto); }
void BM_UnwindDwarf(benchmark::State& state) { unwind_benchmark(state, UnwindMode::Dwarf); }
BENCHMARK(BM_Unwind)->Arg(20);
BENCHMARK(BM_UnwindDwarf)->Arg(20);

void BM_InternStack(benchmark::State& state) {
  StackTable& table = stack_table();
  uintptr_t ips[kMaxNativeFrames];
  for (int i = 0; i < state.range(0); ++i) ips[i] = 0x7f0000001000 + 0x40 * i;
  table.intern(ips, static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(table.intern(ips, static_cast<int>(state.range(0))));
}
BENCHMARK(BM_InternStack)->Arg(20);

void BM_RingPush(benchmark::State& state) {
  if (state.thread_index() == 0) g_drainer = new Drainer(16384);
  // Other threads wait for the drainer to exist (Google Benchmark starts them together).
  while (!__atomic_load_n(&g_drainer, __ATOMIC_ACQUIRE)) {
  }
  uintptr_t ips[20] = {};
  for (auto _ : state) push_event(ips, 20);
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    delete g_drainer;
    g_drainer = nullptr;
  }
}
BENCHMARK(BM_RingPush)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();

// The writer's per-event work once stacks are interned: what bounds the sustained event rate.
void BM_SerializeEvent(benchmark::State& state) {
  std::string out;
  TraceSerializer serializer(&out, /*symbolize=*/false);
  EventRecord r{};
  r.op = format::Op::Alloc;
  r.kind = format::Kind::Device;
  r.api = "cudaMalloc";
  r.flags = kHasResult;
  r.native_depth = 20;
  for (int i = 0; i < 20; ++i) r.native[i] = 0x400000 + 64 * i;
  for (auto _ : state) {
    r.seq++;
    r.addr = 0x700000000000ull + r.seq * 512;
    serializer.event(r);
    if (out.size() > (1 << 20)) out.clear();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SerializeEvent);

void BM_Clock(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(util::monotonic_ns());
}
BENCHMARK(BM_Clock);

// Device queries as a capture layer answers them, without CUDA: device 0, 16 GiB of which 15 free.
int32_t stub_current_device(int32_t) { return 0; }
bool stub_memory(uint64_t* free_bytes, uint64_t* total_bytes) {
  *free_bytes = 15ull << 30;
  *total_bytes = 16ull << 30;
  return true;
}
const DeviceQueries kStubQueries = {"cudaMemGetInfo", stub_current_device, nullptr, stub_memory, nullptr};

void BM_RecordCall(benchmark::State& state) {
  // The recorder starts at the first record_call, configured as a traced program's would be; its
  // trace goes to /dev/null (a literal path of root's: docs/configuration.md).
  setenv("GPUMEMTRACE_OUTPUT", "/dev/null", 1);
  setenv("GPUMEMTRACE_QUIET", "1", 1);
  uint64_t addr = 0x7f0000000000;
  at_depth(static_cast<int>(state.range(0)), [&] {
    for (auto _ : state) {
      {
        HookScope scope(HookLayer::Runtime);
        EventFacts alloc = event::allocation(format::Kind::Device, addr, 4096);
        alloc.api = "cudaMalloc";
        if (scope.recording()) record_call(alloc, kStubQueries);
      }
      {
        HookScope scope(HookLayer::Runtime);
        EventFacts release = event::release(format::Kind::Device, addr);
        release.api = "cudaFree";
        if (scope.recording()) record_call(release, kStubQueries);
      }
      addr += 4096;
    }
  });
  state.SetItemsProcessed(2 * state.iterations());
}
BENCHMARK(BM_RecordCall)->Arg(20);

}  // namespace
}  // namespace gpumemtrace

BENCHMARK_MAIN();
