// interpose/hooks/dlsym.h — the real dlsym, for our own lookups (never wrapped).
//
// Defined in real_function.cpp, not dlsym.cpp: binaries that link the lookups (resolve_real_symbol)
// but must not interpose dlsym themselves (test probes) get them without dlsym.cpp.
// Thread-safety: any thread; racing first calls store the same pointer.
#pragma once

namespace gpumemtrace::driver {

using DlsymFn = void* (*)(void*, const char*);

// glibc's dlsym itself (dlvsym(RTLD_NEXT, "dlsym", <a base version>)), null when not found. Cached.
DlsymFn find_real_dlsym() noexcept;

// glibc's dlsym, bypassing our interposed one (which answers hooked driver names with our wrappers).
// RTLD_NEXT is relative to this library. Null when there is no real dlsym.
void* real_dlsym(void* handle, const char* symbol) noexcept;

}  // namespace gpumemtrace::driver
