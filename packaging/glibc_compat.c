// packaging/glibc_compat.c — the two glibc functions newer than the release bundle's baseline
// (GLIBC_2.34: RHEL 9, Ubuntu 22.04) that the static GCC 12 runtime calls, done with older ones.
//
// The bundle links libstdc++ and libgcc statically (packaging/module.mk). Built against Debian 12's
// glibc 2.36, GCC 12's libgcc_eh finds an exception's unwind tables with _dl_find_object
// (GLIBC_2.35), and libstdc++'s std::random_device reads arc4random (GLIBC_2.36): a file with either
// reference does not start on glibc 2.34 ("version `GLIBC_2.35' not found"). The link wraps both
// (-Wl,--wrap=_dl_find_object,--wrap=arc4random), so the runtime's calls land here; nothing else is
// redirected, and the program's own calls to either function never see these (they are hidden).
//
// Thread-safety: both are reentrant (dl_iterate_phdr takes the loader's lock for the walk).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define GMT_HIDDEN __attribute__((visibility("hidden")))

struct find_request {
  uintptr_t pc;
  struct dl_find_object* result;
  int found;
};

// The loaded object whose PT_LOAD segments hold `pc`: its mapping and its PT_GNU_EH_FRAME, the
// fields libgcc's _Unwind_Find_FDE reads (as libgcc did itself before glibc 2.35).
static int find_object_callback(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct find_request* request = data;
  uintptr_t start = UINTPTR_MAX, end = 0;
  const void* eh_frame = NULL;
  int inside = 0;
  for (size_t i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      const uintptr_t hi = lo + ph->p_memsz;
      if (request->pc >= lo && request->pc < hi) inside = 1;
      if (lo < start) start = lo;
      if (hi > end) end = hi;
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      eh_frame = (const void*)lo;
    }
  }
  if (!inside) return 0;
  request->result->dlfo_flags = 0;
  request->result->dlfo_map_start = (void*)start;
  request->result->dlfo_map_end = (void*)end;
  request->result->dlfo_eh_frame = (void*)eh_frame;
  request->found = 1;
  return 1;
}

// _dl_find_object's contract: 0 and *result filled when `pc` is inside a loaded object, -1 otherwise.
GMT_HIDDEN int __wrap__dl_find_object(void* pc, struct dl_find_object* result) {
  const int saved_errno = errno;
  struct find_request request = {(uintptr_t)pc, result, 0};
  dl_iterate_phdr(find_object_callback, &request);
  if (request.found) {
    // The link map too, for a caller that wants it (libgcc does not); dladdr1 is GLIBC_2.3.3.
    Dl_info info;
    struct link_map* map = NULL;
    result->dlfo_link_map = dladdr1(pc, &info, (void**)&map, RTLD_DL_LINKMAP) ? map : NULL;
  }
  errno = saved_errno;
  return request.found ? 0 : -1;
}

// arc4random's contract: 32 random bits, never fails. getrandom (GLIBC_2.25) blocks only until the
// kernel's pool is seeded; where it is refused (seccomp, a kernel before 3.17) /dev/urandom, and where
// that cannot be read either, the clock: never abort() inside the traced program.
GMT_HIDDEN uint32_t __wrap_arc4random(void) {
  const int saved_errno = errno;
  uint32_t value = 0;
  unsigned char* p = (unsigned char*)&value;
  size_t left = sizeof value;
  while (left > 0) {
    const ssize_t n = getrandom(p, left, 0);
    if (n > 0) {
      p += n;
      left -= (size_t)n;
    } else if (n < 0 && errno != EINTR) {
      break;
    }
  }
  if (left > 0) {
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      while (left > 0) {
        const ssize_t n = read(fd, p, left);
        if (n <= 0 && !(n < 0 && errno == EINTR)) break;
        if (n > 0) p += n, left -= (size_t)n;
      }
      close(fd);
    }
  }
  if (left > 0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    value ^= (uint32_t)now.tv_nsec * 2654435761u ^ (uint32_t)(uintptr_t)&now;
  }
  errno = saved_errno;
  return value;
}
