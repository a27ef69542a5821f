// cupti/backend.cpp — placeholder until the CUPTI backend lands (interposition only).
#include "cupti/backend.h"

namespace gpumemtrace::backend {
bool interpose_recording() noexcept { return true; }
void on_driver_contact() noexcept {}
const char* name() noexcept { return "interpose"; }
}  // namespace gpumemtrace::backend
