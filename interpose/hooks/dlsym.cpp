// interpose/hooks/dlsym.cpp — dlsym interposition: how driver pointers obtained by name become ours.
//
// libcudart (shared or static, and every library carrying a static copy) reaches the driver only
// through dlopen("libcuda.so.1") + dlsym(handle, "cuGetProcAddress_v2"), then cuGetProcAddress for
// everything else; JAX dlsym's every driver symbol. So we define dlsym, and when it is asked for a
// hooked driver symbol we hand out our wrapper (driver_table.h). Facts: ../shared/notes/cuda-capture.md.
//
// Symbol versions: libcudart imports dlsym@GLIBC_2.2.5, new programs dlsym@GLIBC_2.34. Our definition
// is unversioned, which satisfies both (glibc's check_match accepts an unversioned definition for a
// versioned reference; the notes verified the same for cudaMalloc@libcudart.so.13). Exporting the
// two versions with .symver would need a version script defining GLIBC_* nodes in our library.
// The real dlsym comes from dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"); dlvsym is deliberately NOT
// interposed: it is our way to the real dlsym, and libcuda's symbols carry no version.
//
// Caller identity: glibc's dlsym looks at its return address to decide what RTLD_NEXT means and which
// local scope RTLD_DEFAULT searches (an extension loaded RTLD_LOCAL sees its own dependencies). A C
// wrapper would move that to our library. So on x86-64 dlsym is a small assembly stub that asks
// route() first and, for every symbol we do not wrap, JUMPS to the real dlsym with the caller's return
// address untouched: exact glibc semantics for everything but our handful of driver names.
#include "interpose/hooks/dlsym.h"

#include <dlfcn.h>

#include <atomic>

#include "interpose/recorder/capture_backend.h"
#include "interpose/hooks/driver_table.h"
#include "interpose/hooks/real_function.h"
#include "interpose/recorder/recorder.h"

namespace gpumemtrace::driver {
namespace {

void* no_dlsym(void*, const char*) { return nullptr; }

// The real dlsym for the stub to jump to; without one (cannot happen with glibc), dlsym answers null.
GPUMEMTRACE_RUNS_BEFORE_SANITIZERS DlsymFn resolve_real_dlsym() noexcept {
  if (DlsymFn real = find_real_dlsym()) return real;
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) log_line("dlsym hook: the real dlsym was not found; dlsym answers null");
  return &no_dlsym;
}

}  // namespace
}  // namespace gpumemtrace::driver

using namespace gpumemtrace::driver;

// Called by the stub for every dlsym in the process: null means "a driver symbol we wrap, take the C++
// path"; otherwise the real dlsym to jump to.
extern "C" __attribute__((visibility("hidden"))) GPUMEMTRACE_RUNS_BEFORE_SANITIZERS void* gpumemtrace_dlsym_route(
    void* handle, const char* symbol) {
  if (handle != RTLD_NEXT && find_symbol(symbol) >= 0) return nullptr;
  return reinterpret_cast<void*>(resolve_real_dlsym());
}

// dlsym for a hooked driver symbol (handle is RTLD_DEFAULT or a library handle).
extern "C" __attribute__((visibility("hidden"))) void* gpumemtrace_dlsym_hooked(void* handle, const char* symbol) {
  const int fn = find_symbol(symbol);
  // Looking up a driver function is a contact with the driver: the backend is decided before the
  // wrapper handed out here can be called (the wrappers themselves never decide).
  if (fn >= 0) gpumemtrace::backend::on_driver_contact();
  void* p = real_dlsym(handle, symbol);
  if (!p || fn < 0) return p;
  stats().dlsym_driver.fetch_add(1, std::memory_order_relaxed);
  if (is_own_code(p)) {
    // Our exported definition (RTLD_DEFAULT finds it first). Without a driver behind it, answer null
    // as glibc would have: programs probe for the driver this way.
    return export_real(static_cast<Fn>(fn)) ? p : nullptr;
  }
  return wrap(fn, p);
}

#if defined(__x86_64__)
// dlsym(handle, symbol): rdi, rsi. Saves them around route(), then tail-jumps.
__asm__(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call gpumemtrace_dlsym_route
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    je gpumemtrace_dlsym_hooked
    jmp *%rax
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#else
// Other architectures: a plain C wrapper. RTLD_NEXT and RTLD_DEFAULT then resolve relative to this
// library instead of the caller (documented in docs/capture.md).
extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* symbol) {
  void* real = gpumemtrace_dlsym_route(handle, symbol);
  return real ? reinterpret_cast<void* (*)(void*, const char*)>(real)(handle, symbol)
              : gpumemtrace_dlsym_hooked(handle, symbol);
}
#endif

// ---- cudaGetDriverEntryPoint[ByVersion][_ptsz]: the runtime's door to cuGetProcAddress ----
// The runtime answers from the driver's cuGetProcAddress, which it obtained through our dlsym, so the
// pointer is usually ours already (wrap() leaves it); this covers runtimes that cached theirs.
// Declared without the CUDA headers (cudaError_t and the status enum are ints in the ABI).
namespace {

using EntryFn = int (*)(const char*, void**, unsigned long long, int*);
using EntryByVersionFn = int (*)(const char*, void**, unsigned int, unsigned long long, int*);
constexpr int kLatestVersion = 1000000;  // no version given: the runtime's own, newer than any row
constexpr int kCudaErrorSymbolNotFound = 500;  // cudaErrorSymbolNotFound

gpumemtrace::RealFunction<EntryFn> real_entry{"cudaGetDriverEntryPoint", gpumemtrace::Library::CudaRuntime};
gpumemtrace::RealFunction<EntryFn> real_entry_ptsz{"cudaGetDriverEntryPoint_ptsz",
                                                   gpumemtrace::Library::CudaRuntime};
gpumemtrace::RealFunction<EntryByVersionFn> real_entry_v{"cudaGetDriverEntryPointByVersion",
                                                         gpumemtrace::Library::CudaRuntime};
gpumemtrace::RealFunction<EntryByVersionFn> real_entry_v_ptsz{"cudaGetDriverEntryPointByVersion_ptsz",
                                                              gpumemtrace::Library::CudaRuntime};

// The _ptsz entry points mean "per-thread default stream" unless the flags choose.
unsigned long long ptsz_flags(unsigned long long flags) {
  return (flags & 3) == 0 ? flags | 2ULL /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */ : flags;
}

int wrap_entry(int rc, const char* symbol, void** func, int version, unsigned long long flags) {
  stats().procaddr_calls.fetch_add(1, std::memory_order_relaxed);
  if (rc == 0 && func && *func) *func = wrap(find_proc(symbol, version, flags), *func);
  return rc;
}

}  // namespace

#define GPUMEMTRACE_EXPORT extern "C" __attribute__((visibility("default")))

GPUMEMTRACE_EXPORT int cudaGetDriverEntryPoint(const char* symbol, void** func, unsigned long long flags,
                                               int* status) {
  if (!real_entry) return kCudaErrorSymbolNotFound;
  return wrap_entry(real_entry()(symbol, func, flags, status), symbol, func, kLatestVersion, flags);
}

GPUMEMTRACE_EXPORT int cudaGetDriverEntryPoint_ptsz(const char* symbol, void** func, unsigned long long flags,
                                                    int* status) {
  if (!real_entry_ptsz) return kCudaErrorSymbolNotFound;
  return wrap_entry(real_entry_ptsz()(symbol, func, flags, status), symbol, func, kLatestVersion,
                    ptsz_flags(flags));
}

GPUMEMTRACE_EXPORT int cudaGetDriverEntryPointByVersion(const char* symbol, void** func, unsigned int version,
                                                        unsigned long long flags, int* status) {
  if (!real_entry_v) return kCudaErrorSymbolNotFound;
  return wrap_entry(real_entry_v()(symbol, func, version, flags, status), symbol, func,
                    static_cast<int>(version), flags);
}

GPUMEMTRACE_EXPORT int cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** func, unsigned int version,
                                                             unsigned long long flags, int* status) {
  if (!real_entry_v_ptsz) return kCudaErrorSymbolNotFound;
  return wrap_entry(real_entry_v_ptsz()(symbol, func, version, flags, status), symbol, func,
                    static_cast<int>(version), ptsz_flags(flags));
}
