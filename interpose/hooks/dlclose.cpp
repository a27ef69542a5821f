// interpose/hooks/dlclose.cpp — dlclose: code that is unloaded takes the frame-pointer verdicts of its
// call sites with it (interpose/recorder/unwind.cpp keys them by address; another library may be
// mapped there next). Every caller gets exactly what libc's dlclose gives: the same result, dlerror
// state and errno.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cerrno>

#include "interpose/hooks/real_function.h"
#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/recorder/unwind.h"

namespace {

gpumemtrace::RealFunction<int (*)(void*)> real_dlclose{"dlclose", gpumemtrace::Library::Libc};

// The loader's count of objects unloaded so far (dlpi_subs), as last seen.
std::atomic<unsigned long long> g_unloads_seen{0};

int read_unloads(dl_phdr_info* info, size_t size, void* data) {
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
    *static_cast<unsigned long long*>(data) = info->dlpi_subs;
  return 1;  // the counters are the same in every entry: the first is enough
}

// dlclose calls made while one is running (a library's destructor closing another): the loader lock
// is held then, so the writer, which takes it to list the modules, must not be waited for.
__thread int t_dlclose_depth __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace

extern "C" int dlclose(void* handle) {
  auto real = real_dlclose();
  if (!real) return -1;  // cannot happen with glibc
  // The library may be unmapped now: the writer first writes every event recorded so far, while the
  // frames in it can still be named (its module line, symbols and lines); afterwards they could not.
  if (t_dlclose_depth == 0) gpumemtrace::drain_before_unload();
  ++t_dlclose_depth;
  const int rc = real(handle);
  --t_dlclose_depth;
  const int saved_errno = errno;
  // Most dlclose calls unmap nothing (a reference count drops): forget only when something went.
  // (The walk is fenced from fork like the writer's: see lock_loader_walks.)
  unsigned long long unloads = 0;
  gpumemtrace::lock_loader_walks();
  dl_iterate_phdr(read_unloads, &unloads);
  gpumemtrace::unlock_loader_walks();
  if (g_unloads_seen.exchange(unloads, std::memory_order_relaxed) != unloads) gpumemtrace::forget_call_sites();
  errno = saved_errno;
  return rc;
}
