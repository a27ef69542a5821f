// cupti/backend.cpp — backend choice (GPUMEMTRACE_BACKEND) and the CUPTI backend.
//
// interpose (default): the hooks record. cupti: CUPTI driver-domain callbacks record (cupti_events.h)
// and the hooks pass calls through. auto: cupti when libcupti loads and the subscriber slot is free,
// else interpose. Why interpose is the default: CUPTI 13 allows ONE subscriber, and holding it makes
// torch.profiler / Nsight lose CUDA activity in the profiled program; interposition sees every route
// to the driver anyway (docs/capture.md).
//
// libcupti is dlopen'ed lazily (never NEEDED: a NEEDED CUDA library breaks pip environments) from
// GPUMEMTRACE_CUPTI_PATH, libcupti.so.13, libcupti.so, or $CUDA_HOME/lib64. Every CUPTI error is one
// warning line and a fallback to interposition; nothing here exits or throws.
//
// Thread-safety: the decision is a CAS on g_state; the thread that wins starts CUPTI while the others
// keep recording through the hooks (state Deciding counts as interpose), so no call waits.
#include "interpose/recorder/capture_backend.h"

#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "cupti/cupti_events.h"
#include "interpose/hooks/driver_query.h"
#include "interpose/recorder/config.h"
#include "interpose/recorder/recorder.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace::backend {
namespace {

enum State : int { kUndecided, kDeciding, kInterpose, kCupti };
std::atomic<int> g_state{kUndecided};

enum class Wanted { Interpose, Cupti, Auto };

Wanted wanted() noexcept {
  const char* v = recorder_getenv(var::kBackend);
  if (!v || !*v || strcmp(v, "interpose") == 0) return Wanted::Interpose;
  if (strcmp(v, "cupti") == 0) return Wanted::Cupti;
  if (strcmp(v, "auto") == 0) return Wanted::Auto;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) log_line("GPUMEMTRACE_BACKEND must be interpose, cupti or auto; using interpose");
  return Wanted::Interpose;
}

// ---- libcupti, opened lazily ----
struct CuptiApi {
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) Subscribe_v2 = nullptr;
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) ActivityRegisterTimestampCallback = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
};
CuptiApi g_api;
CUpti_SubscriberHandle g_subscriber = nullptr;

void* open_libcupti() noexcept {
  if (const char* path = recorder_getenv(var::kCuptiPath); path && *path)
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
  for (const char* name : {"libcupti.so.13", "libcupti.so"})
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  const char* home = recorder_getenv("CUDA_HOME");
  char path[4096];
  snprintf(path, sizeof(path), "%s/lib64/libcupti.so", home && *home ? home : "/usr/local/cuda");
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

bool load_api() noexcept {
  void* h = open_libcupti();
  if (!h) return false;
#define GPUMEMTRACE_LOAD(field, symbol) g_api.field = reinterpret_cast<decltype(g_api.field)>(dlsym(h, symbol));
  GPUMEMTRACE_LOAD(Subscribe, "cuptiSubscribe")
  GPUMEMTRACE_LOAD(Subscribe_v2, "cuptiSubscribe_v2")
  GPUMEMTRACE_LOAD(Unsubscribe, "cuptiUnsubscribe")
  GPUMEMTRACE_LOAD(EnableCallback, "cuptiEnableCallback")
  GPUMEMTRACE_LOAD(ActivityEnable, "cuptiActivityEnable")
  GPUMEMTRACE_LOAD(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks")
  GPUMEMTRACE_LOAD(ActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback")
  GPUMEMTRACE_LOAD(ActivityGetNextRecord, "cuptiActivityGetNextRecord")
  GPUMEMTRACE_LOAD(ActivityFlushAll, "cuptiActivityFlushAll")
  GPUMEMTRACE_LOAD(GetResultString, "cuptiGetResultString")
#undef GPUMEMTRACE_LOAD
  // Unsubscribe is required: a fallback after subscribing must give CUPTI's single slot back.
  return (g_api.Subscribe || g_api.Subscribe_v2) && g_api.EnableCallback && g_api.Unsubscribe;
}

const char* result_string(CUptiResult r) noexcept {
  const char* s = nullptr;
  if (!g_api.GetResultString || g_api.GetResultString(r, &s) != CUPTI_SUCCESS || !s) return "unknown error";
  return s;
}

// ---- callbacks ----
// The runtime call in progress on this thread (static name), for attribution. Trivially destructible.
thread_local const char* t_runtime_api = nullptr;

std::atomic<uint64_t> g_callback_allocs{0};
cupti::ActivityCounts g_activity;  // written only by CUPTI's buffer-completion thread (serialised by CUPTI)

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (!cb) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (const char* name = cupti::runtime_api_name(cbid))
      t_runtime_api = cb->callbackSite == CUPTI_API_ENTER ? name : nullptr;
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  HookScope scope;  // the recorder's own CUDA calls (and our device queries) find it open and are skipped
  if (!scope.recording()) return;
  EventFacts e;
  if (!cupti::driver_callback_event(cbid, *cb, t_runtime_api, &e)) return;
  if (e.op == format::Op::Alloc && e.result == 0) g_callback_allocs.fetch_add(1, std::memory_order_relaxed);
  // As the driver hooks record it: device, first sighting, meminfo after an out-of-memory error.
  record_call(e, driver::kDriverQueries);  // keeps errno
}

// ---- activity (audit) ----
constexpr size_t kActivityBuffer = 1 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kActivityBuffer));
  *size = *buffer ? kActivityBuffer : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  cupti::count_buffer(buffer, valid, g_api.ActivityGetNextRecord, &g_activity);
  free(buffer);
}

void at_exit() {
  if (g_state.load() != kCupti) return;
  if (g_api.ActivityFlushAll) g_api.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const uint64_t seen = g_callback_allocs.load();
  const char* stats = recorder_getenv(var::kDriverStats);
  if (g_activity.allocations > seen || (stats && strcmp(stats, "1") == 0)) {
    char line[256];
    snprintf(line, sizeof(line),
             "cupti audit: %llu allocations in activity records, %llu through callbacks, %llu pool trims",
             static_cast<unsigned long long>(g_activity.allocations), static_cast<unsigned long long>(seen),
             static_cast<unsigned long long>(g_activity.pool_trims));
    log_line(line);
  }
}

// Enables the callbacks `ids_of` lists in `domain`; false at the first failure.
bool enable_callbacks(CUpti_CallbackDomain domain, int (*ids_of)(CUpti_CallbackId*, int)) noexcept {
  CUpti_CallbackId ids[64];  // more than either list holds
  const int n = ids_of(ids, 64);
  for (int i = 0; i < n; ++i)
    if (g_api.EnableCallback(1, g_subscriber, domain, ids[i]) != CUPTI_SUCCESS) return false;
  return true;
}

// Starts CUPTI; false (after one warning line) when it cannot: the caller falls back to interposition.
bool start_cupti(bool quiet_if_unavailable) noexcept {
  HookScope scope;  // libcupti's own driver calls are not the program's
  if (!load_api()) {
    if (!quiet_if_unavailable) log_line("backend cupti: libcupti not found (GPUMEMTRACE_CUPTI_PATH); using interposition");
    return false;
  }
  CUptiResult r;
  char holder[256] = {};
  if (g_api.Subscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpumemtrace";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof(holder);
    r = g_api.Subscribe_v2(&g_subscriber, on_callback, nullptr, &params);
  } else {
    r = g_api.Subscribe(&g_subscriber, on_callback, nullptr);
  }
  if (r != CUPTI_SUCCESS) {
    char line[512];
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      snprintf(line, sizeof(line), "backend cupti: the CUPTI subscriber slot is held by %s; using interposition",
               holder[0] ? holder : "another tool (Nsight, a profiler)");
    else
      snprintf(line, sizeof(line), "backend cupti: cuptiSubscribe failed (%s); using interposition", result_string(r));
    log_line(line);
    return false;
  }
  // Timestamps on the recorder's clock: must be registered before any activity kind is enabled.
  if (g_api.ActivityRegisterTimestampCallback) g_api.ActivityRegisterTimestampCallback(util::monotonic_ns);
  // Only the ids we use: a whole domain would mean a callback on every launch and copy.
  const bool ok = enable_callbacks(CUPTI_CB_DOMAIN_DRIVER_API, cupti::driver_callback_ids) &&
                  enable_callbacks(CUPTI_CB_DOMAIN_RUNTIME_API, cupti::runtime_callback_ids);
  if (!ok) {
    // Give the single subscriber slot back (it disables every callback): Nsight and torch.profiler,
    // which the fallback exists for, need it.
    log_line("backend cupti: enabling callbacks failed; using interposition");
    g_api.Unsubscribe(g_subscriber);
    g_subscriber = nullptr;
    return false;
  }
  if (g_api.ActivityRegisterCallbacks && g_api.ActivityEnable && g_api.ActivityGetNextRecord &&
      g_api.ActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS) {
    g_api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
    g_api.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
  }
  atexit(at_exit);
  return true;
}

void decide(bool from_injection) noexcept {
  int expected = kUndecided;
  if (!g_state.compare_exchange_strong(expected, kDeciding, std::memory_order_acq_rel)) return;
  const Wanted w = wanted();
  // Loaded only as an injection library (not preloaded), the hooks see nothing: CUPTI is the only way.
  const bool want_cupti = w != Wanted::Interpose || (from_injection && !driver::is_own_code(dlsym(RTLD_DEFAULT, "dlsym")));
  const bool cupti = want_cupti && start_cupti(w == Wanted::Auto);
  g_state.store(cupti ? kCupti : kInterpose, std::memory_order_release);
}

}  // namespace

bool interpose_recording() noexcept { return g_state.load(std::memory_order_relaxed) != kCupti; }

void on_driver_contact() noexcept {
  if (g_state.load(std::memory_order_relaxed) == kUndecided) decide(false);
}

const char* name() noexcept { return g_state.load(std::memory_order_relaxed) == kCupti ? "cupti" : "interpose"; }

void decide_from_injection() noexcept { decide(true); }

}  // namespace gpumemtrace::backend

// CUDA_INJECTION64_PATH=/path/libgpumemtrace.so: the driver loads us during cuInit and calls this.
// Returns 1 (success) whatever happens: an injection failure must not fail the program's cuInit.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  gpumemtrace::backend::decide_from_injection();
  return 1;
}
