// tests/e2e/plugin/libdw_out_of_memory.c — a malloc that fails libdw's large blocks, as an address
// space limit (RLIMIT_AS) makes it fail in a real run: preloaded after the recorder by
// tests/e2e/test_hostile_start.py. libdw allocates its DWARF memory in blocks of about 32 KiB
// (libdw_alloc.c, __libdw_allocate), and calls its out-of-memory handler when one cannot be had; every
// other allocation (libdw's small ones, everyone else's) is served as usual.
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void* __libc_malloc(size_t size);

static uintptr_t libdw_lo, libdw_hi;

static int find_libdw(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  if (!strstr(info->dlpi_name, "/libdw.so")) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
    if (!libdw_lo || start < libdw_lo) libdw_lo = start;
    if (start + info->dlpi_phdr[i].p_memsz > libdw_hi) libdw_hi = start + info->dlpi_phdr[i].p_memsz;
  }
  return 1;
}

// Every object is loaded before any constructor runs: libdw (the recorder's dependency) is there.
__attribute__((constructor)) static void find_libdw_once(void) { dl_iterate_phdr(find_libdw, NULL); }

void* malloc(size_t size) {
  const uintptr_t caller = (uintptr_t)__builtin_return_address(0);
  if (caller >= libdw_lo && caller < libdw_hi && size >= 16384) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_malloc(size);
}
