// interpose/recorder/capture_backend.h — which capture layer records events: interposition (hooks) or
// CUPTI callbacks. The recorder owns this interface and its hooks ask it; cupti/backend.cpp implements
// it (the arrow runs from cupti/ down to the recorder, never up), and unit tests that link no CUPTI
// implement it as interposition only (tests/unit/support/backend_interpose_only.cpp).
//
// GPUMEMTRACE_BACKEND=interpose|cupti|auto (docs/capture.md says why interpose is the default).
// The choice is made once, at the first contact with the CUDA driver, or in InitializeInjection
// when the driver loads us through CUDA_INJECTION64_PATH.
//
// Thread-safety: all functions may be called from any thread; the hot-path query is one relaxed load.
#pragma once

namespace gpumemtrace::backend {

// False while CUPTI is the recording backend. Interposition hooks (runtime and driver) check this
// FIRST and then call the real function untouched, without opening a HookScope: a hook's scope would
// make the CUPTI callback underneath find itself nested and record nothing.
bool interpose_recording() noexcept;

// First contact with the driver (a driver symbol looked up or called, InitializeInjection): decides
// the backend and starts CUPTI when it is chosen. Idempotent; cheap after the first call.
void on_driver_contact() noexcept;

// "interpose" or "cupti": the trace header's "backend" field. Before the decision: the configured
// preference ("interpose" for auto).
const char* name() noexcept;

// InitializeInjection (CUDA_INJECTION64_PATH): decides now; CUPTI even under the default backend when
// the library is not also preloaded (then no hook can see anything).
void decide_from_injection() noexcept;

}  // namespace gpumemtrace::backend
