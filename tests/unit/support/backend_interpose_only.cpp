// tests/unit/support/backend_interpose_only.cpp — interpose/recorder/capture_backend.h for unit tests
// and benchmarks that link the recorder without hooks: interposition is the backend, there is no
// driver to contact.
#include "interpose/recorder/capture_backend.h"

namespace gpumemtrace::backend {
bool interpose_recording() noexcept { return true; }
void on_driver_contact() noexcept {}
const char* name() noexcept { return "interpose"; }
void decide_from_injection() noexcept {}
}  // namespace gpumemtrace::backend
