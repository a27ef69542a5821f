// interpose/hooks/driver_table.cpp — lookups and slot wrapping for the driver hooks (driver_table.h).
#include "interpose/hooks/driver_table.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/hooks/driver_cuda.h"
#include "interpose/hooks/real_function.h"
#include "interpose/recorder/config.h"
#include "interpose/recorder/recorder.h"

namespace gpumemtrace::driver {

const FnInfo kFnInfo[kFnCount] = {
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning) \
  {#symbol, #proc, since, Stream::stream, Need::need},
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
};

std::atomic<void*> g_real[kFnCount][kSlots];

Stats& stats() noexcept {
  static Stats s;  // trivially constructible atomics: no constructor ordering issue
  return s;
}

GPUMEMTRACE_RUNS_BEFORE_SANITIZERS int find_symbol(const char* symbol) noexcept {
  if (!symbol || symbol[0] != 'c' || symbol[1] != 'u') return -1;
  for (int i = 0; i < kFnCount; ++i)
    if (strcmp(kFnInfo[i].symbol, symbol) == 0) return i;
  return -1;
}

int find_proc(const char* proc, int cuda_version, uint64_t flags) noexcept {
  if (!proc || proc[0] != 'c' || proc[1] != 'u') return -1;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  int best = -1;
  for (int i = 0; i < kFnCount; ++i) {
    const FnInfo& f = kFnInfo[i];
    if (strcmp(f.proc, proc) != 0 || f.since > cuda_version) continue;
    if (f.stream == Stream::Legacy && per_thread) continue;
    if (f.stream == Stream::PerThread && !per_thread) continue;
    if (best < 0 || f.since > kFnInfo[best].since) best = i;
  }
  return best;
}

namespace {

const void* own_base() noexcept {
  static std::atomic<const void*> base{nullptr};
  const void* b = base.load(std::memory_order_acquire);
  if (!b) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&own_base), &info) && info.dli_fbase) b = info.dli_fbase;
    base.store(b, std::memory_order_release);
  }
  return b;
}

std::atomic<void*> g_resolver_v2{nullptr};  // real cuGetProcAddress_v2
std::atomic<void*> g_resolver_v1{nullptr};  // real cuGetProcAddress (4 arguments)

}  // namespace

bool is_own_code(const void* p) noexcept {
  if (!p) return false;
  Dl_info info{};
  return dladdr(p, &info) && info.dli_fbase && info.dli_fbase == own_base();
}

void* wrap(int fn, void* real) noexcept {
  if (fn < 0 || fn >= kFnCount || !real || is_own_code(real)) return real;
  if (is_resolver(static_cast<Fn>(fn))) note_real_resolver(static_cast<Fn>(fn), real);
  for (int s = 0; s < kSlots; ++s) {
    void* cur = g_real[fn][s].load(std::memory_order_acquire);
    if (!cur && g_real[fn][s].compare_exchange_strong(cur, real, std::memory_order_acq_rel)) cur = real;
    if (cur == real) {
      stats().wrapped.fetch_add(1, std::memory_order_relaxed);
      return kSlotWrappers[fn][s];
    }
  }
  if (stats().slots_full.fetch_add(1, std::memory_order_relaxed) == 0)
    log_line("driver hooks: more distinct driver entry points than wrapper slots; some calls are not traced");
  return real;
}

namespace {

// `symbol` from the next object after us, else from a libcuda loaded RTLD_LOCAL. Not ours: calling
// our own definition would loop. Takes the loader's lock: resolution paths only.
void* resolve_driver_symbol(const char* symbol) noexcept {
  void* p = resolve_real_symbol(symbol, Library::CudaDriver);
  return p && !is_own_code(p) ? p : nullptr;
}

// A loaded driver without a function every supported driver has: one line per function. Silent when
// no driver is loaded at all (programs probe for one with dlsym; no_real_function covers calls).
void warn_missing(Fn fn) noexcept {
  static std::atomic<bool> logged[kFnCount];
  const FnInfo& info = kFnInfo[static_cast<int>(fn)];
  std::atomic<bool>& done = logged[static_cast<int>(fn)];
  char line[256];
  if (info.need != Need::Required || done.load(std::memory_order_relaxed)) return;
  if (!find_loaded_library("libcuda.so", line, sizeof(line)) || done.exchange(true)) return;
  snprintf(line, sizeof(line), "driver hooks: the loaded CUDA driver has no %s (every supported driver has it: a "
           "broken installation?); calls to it return CUDA_ERROR_NOT_INITIALIZED", info.symbol);
  log_line(line);
}

}  // namespace

void* export_real(Fn fn) noexcept {
  static std::atomic<void*> cache[kFnCount];
  const int i = static_cast<int>(fn);
  void* p = cache[i].load(std::memory_order_acquire);
  if (p) return p;
  p = resolve_driver_symbol(kFnInfo[i].symbol);
  if (!p) {
    warn_missing(fn);
    return nullptr;
  }
  if (is_resolver(fn)) note_real_resolver(fn, p);  // once, when cached: not per resolver call
  cache[i].store(p, std::memory_order_release);
  return p;
}

void note_real_resolver(Fn fn, void* real) noexcept {
  void* expected = nullptr;
  if (fn == Fn::cuGetProcAddress_v2)
    g_resolver_v2.compare_exchange_strong(expected, real, std::memory_order_acq_rel);
  else if (fn == Fn::cuGetProcAddress)
    g_resolver_v1.compare_exchange_strong(expected, real, std::memory_order_acq_rel);
}

void* query_function(Query q) noexcept {
  struct QueryInfo {
    const char* proc;
    int version;
    const char* symbol;
  };
  static constexpr QueryInfo kQueries[] = {
      {"cuCtxGetDevice", 2000, "cuCtxGetDevice"},
      {"cuCtxGetDevice", 13000, "cuCtxGetDevice_v2"},  // (CUdevice*, CUcontext)
      {"cuMemGetInfo", 3020, "cuMemGetInfo_v2"},
      {"cuDeviceGetName", 2000, "cuDeviceGetName"},
      {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2"},
  };
  static_assert(sizeof(kQueries) / sizeof(kQueries[0]) == static_cast<size_t>(Query::kCount),
                "one row per Query");
  static std::atomic<void*> cache[static_cast<int>(Query::kCount)];
  static std::atomic<int> attempts[static_cast<int>(Query::kCount)];
  const int i = static_cast<int>(q);
  void* p = cache[i].load(std::memory_order_acquire);
  if (p) return p;
  // A driver without the function would otherwise cost a dlsym (a lock) per event.
  if (attempts[i].fetch_add(1, std::memory_order_relaxed) >= 8) return nullptr;
  const QueryInfo& qi = kQueries[i];
  if (void* r = g_resolver_v2.load(std::memory_order_acquire)) {
    using Pfn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    if (reinterpret_cast<Pfn>(r)(qi.proc, &p, qi.version, 0, nullptr) != CUDA_SUCCESS) p = nullptr;
  } else if (void* r1 = g_resolver_v1.load(std::memory_order_acquire)) {
    using Pfn = CUresult (*)(const char*, void**, int, cuuint64_t);
    if (reinterpret_cast<Pfn>(r1)(qi.proc, &p, qi.version, 0) != 0) p = nullptr;
  }
  if (p && is_own_code(p)) p = nullptr;
  if (!p) p = resolve_driver_symbol(qi.symbol);
  if (p) cache[i].store(p, std::memory_order_release);
  return p;
}

int32_t current_device() noexcept {
  auto fn = reinterpret_cast<CUresult (*)(CUdevice*)>(query_function(Query::CtxGetDevice));
  CUdevice d = -1;
  return fn && fn(&d) == CUDA_SUCCESS ? d : -1;
}

int32_t device_of(CUcontext ctx) noexcept {
  auto fn = reinterpret_cast<CUresult (*)(CUdevice*, CUcontext)>(query_function(Query::CtxGetDeviceOf));
  CUdevice d = -1;
  if (fn && fn(&d, ctx) == CUDA_SUCCESS) return d;
  return current_device();
}

namespace {

int32_t driver_current_device(int32_t) { return current_device(); }

int32_t driver_device_of_context(const void* ctx) {
  return device_of(static_cast<CUcontext>(const_cast<void*>(ctx)));
}

bool driver_memory(uint64_t* free_bytes, uint64_t* total_bytes) {
  auto fn = reinterpret_cast<CUresult (*)(size_t*, size_t*)>(query_function(Query::MemGetInfo));
  size_t free_now = 0, total = 0;
  if (!fn || fn(&free_now, &total) != CUDA_SUCCESS) return false;
  *free_bytes = free_now;
  *total_bytes = total;
  return true;
}

void driver_describe_device(int32_t device, char* name, size_t name_size, uint64_t* total_bytes) {
  auto get_name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(query_function(Query::DeviceGetName));
  auto total_mem = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(query_function(Query::DeviceTotalMem));
  if (!get_name || get_name(name, static_cast<int>(name_size) - 1, device) != CUDA_SUCCESS) name[0] = '\0';
  size_t total = 0;
  if (total_mem && total_mem(&total, device) == CUDA_SUCCESS) *total_bytes = total;
}

}  // namespace

const DeviceQueries kDriverQueries = {"cuMemGetInfo_v2", driver_current_device, driver_device_of_context,
                                      driver_memory, driver_describe_device};

namespace {

// GPUMEMTRACE_DRIVER_STATS=1: one line at exit with what the driver hooks saw. Lets tests check that
// the runtime's cuGetProcAddress traffic went through us even when it makes no allocation.
__attribute__((destructor)) void print_stats() {
  const char* env = recorder_getenv(var::kDriverStats);
  if (!env || strcmp(env, "1") != 0) return;
  char line[256];
  snprintf(line, sizeof(line),
           "driver stats: dlsym_driver=%llu procaddr_calls=%llu wrapped=%llu slots_full=%llu",
           static_cast<unsigned long long>(stats().dlsym_driver.load()),
           static_cast<unsigned long long>(stats().procaddr_calls.load()),
           static_cast<unsigned long long>(stats().wrapped.load()),
           static_cast<unsigned long long>(stats().slots_full.load()));
  log_line(line);
}

}  // namespace
}  // namespace gpumemtrace::driver
