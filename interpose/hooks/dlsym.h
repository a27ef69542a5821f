// interpose/hooks/dlsym.h — the real dlsym, for the driver hooks' own lookups (never wrapped).
#pragma once

namespace gpumemtrace::driver {

// glibc's dlsym, bypassing our interposed one. RTLD_NEXT is relative to this library.
void* real_dlsym(void* handle, const char* symbol) noexcept;

}  // namespace gpumemtrace::driver
