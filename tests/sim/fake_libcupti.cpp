// tests/sim/fake_libcupti.cpp — a simulated CUPTI: build/sim/libfakecupti.so, for the CUPTI backend's
// tests without a GPU (GPUMEMTRACE_CUPTI_PATH points at it; it is not named libcupti.so so that no
// other test finds it by accident).
//
// The callback API subset gpumemtrace uses: one subscriber (a second one gets
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), callbacks enabled per (domain, id), and
// cuptiGetResultString. The calls themselves come from the simulated driver
// (tests/sim/fake_libcuda.cpp), which it is linked against: it fires driver-domain callbacks at
// API_ENTER / API_EXIT of its memory functions, and this library forwards the enabled ones to the
// subscriber. No activity API: the backend then runs without its audit, as with a CUPTI that lacks it.
// Thread-safety: the enabled table is atomic; subscribing is not meant to race with callbacks.
#include <cupti.h>

#include <atomic>

extern "C" void gpumemtrace_sim_set_api_callback(void (*callback)(CUpti_CallbackDomain, CUpti_CallbackId,
                                                                  const CUpti_CallbackData*));

namespace {

constexpr unsigned kMaxIds = 4096;
std::atomic<bool> g_enabled[CUPTI_CB_DOMAIN_SIZE][kMaxIds];
std::atomic<CUpti_CallbackFunc> g_callback{nullptr};
void* g_userdata = nullptr;
int g_subscriber_token = 0;  // its address is the one subscriber handle

void dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data) {
  CUpti_CallbackFunc callback = g_callback.load(std::memory_order_acquire);
  if (callback && domain < CUPTI_CB_DOMAIN_SIZE && cbid < kMaxIds &&
      g_enabled[domain][cbid].load(std::memory_order_relaxed))
    callback(g_userdata, domain, cbid, data);
}

CUpti_SubscriberHandle the_subscriber() { return reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber_token); }

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  if (!subscriber || !callback) return CUPTI_ERROR_INVALID_PARAMETER;
  if (g_callback.load()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_userdata = userdata;
  g_callback.store(callback, std::memory_order_release);
  gpumemtrace_sim_set_api_callback(dispatch);
  *subscriber = the_subscriber();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  if (subscriber != the_subscriber() || !g_callback.load()) return CUPTI_ERROR_INVALID_PARAMETER;
  gpumemtrace_sim_set_api_callback(nullptr);
  g_callback.store(nullptr, std::memory_order_release);
  for (auto& domain : g_enabled)
    for (auto& id : domain) id.store(false, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (subscriber != the_subscriber() || domain >= CUPTI_CB_DOMAIN_SIZE || cbid >= kMaxIds)
    return CUPTI_ERROR_INVALID_PARAMETER;
  g_enabled[domain][cbid].store(enable != 0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI error (simulated)";
  return CUPTI_SUCCESS;
}

}  // extern "C"
