// interpose/recorder/program_strings.cpp — fault-free reads of the program's strings (see program_strings.h).
#include "interpose/recorder/program_strings.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace gpumemtrace {
namespace {

uintptr_t page_size() {
  static const uintptr_t size = [] {
    const long n = sysconf(_SC_PAGESIZE);
    return n > 0 ? static_cast<uintptr_t>(n) : uintptr_t{4096};
  }();
  return size;
}

std::atomic<bool> g_use_readv{true}, g_use_mincore{true};

// This process's id, for process_vm_readv: getpid() is a system call every time (glibc keeps no copy),
// and the DWARF unwinder checks a page or two per unwind. 0: not known yet. A fork child forgets it
// (forget_pid, from the recorder's atfork handler); a copy made without that handler passes its hooks
// through (lifecycle.cpp) and checks no page; a CLONE_VM child shares the memory the parent's id reads.
std::atomic<pid_t> g_pid{0};

pid_t own_pid() {
  pid_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

}  // namespace

void forget_pid() noexcept { g_pid.store(0, std::memory_order_relaxed); }

void restrict_page_checks(bool readv, bool mincore) noexcept {
  g_use_readv.store(readv, std::memory_order_relaxed);
  g_use_mincore.store(mincore, std::memory_order_relaxed);
}

bool page_readable(uintptr_t page) noexcept {
  const int saved = errno;
  char byte;
  iovec local{&byte, 1};
  iovec remote{reinterpret_cast<void*>(page), 1};
  bool readable = false;
  const ssize_t n = g_use_readv.load(std::memory_order_relaxed) ? process_vm_readv(own_pid(), &local, 1, &remote, 1, 0)
                                                                : (errno = ENOSYS, -1);
  if (n == 1) {
    readable = true;
  } else if (errno == EFAULT) {
    readable = false;
  } else if (g_use_mincore.load(std::memory_order_relaxed)) {
    // process_vm_readv refused (seccomp, an old kernel): mincore() fails with ENOMEM on an unmapped page.
    unsigned char resident;
    readable = !(mincore(reinterpret_cast<void*>(page), 1, &resident) != 0 && errno == ENOMEM);
  }
  errno = saved;
  return readable;
}

bool PageCache::readable(uintptr_t page) {
  for (uintptr_t known : pages_)
    if (known == page && page) return true;
  if (!page_readable(page)) return false;
  pages_[next_] = page;
  next_ = (next_ + 1) % kEntries;
  return true;
}

size_t program_readable_bytes(const void* p, size_t max, PageCache* cache) noexcept {
  if (!p) return 0;
  PageCache local;
  if (!cache) cache = &local;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t mask = ~(page_size() - 1);
  size_t readable = 0;
  while (readable < max) {
    const uintptr_t at = start + readable;
    if (at < start) break;  // past the end of the address space
    const uintptr_t page = at & mask;
    if (!cache->readable(page)) break;
    readable += std::min<size_t>(max - readable, page + page_size() - at);
  }
  return readable;
}

size_t program_strnlen(const char* text, size_t max, PageCache* cache) noexcept {
  if (!text) return 0;
  PageCache local;
  if (!cache) cache = &local;
  const uintptr_t mask = ~(page_size() - 1);
  size_t n = 0;
  while (n < max) {
    // One page at a time, confirmed before it is read: the NUL is usually on the first.
    const size_t chunk = program_readable_bytes(text + n, std::min<size_t>(max - n, ((reinterpret_cast<uintptr_t>(text + n) & mask) + page_size()) - reinterpret_cast<uintptr_t>(text + n)), cache);
    if (chunk == 0) return n;
    if (const void* nul = memchr(text + n, '\0', chunk)) return n + static_cast<size_t>(static_cast<const char*>(nul) - (text + n));
    n += chunk;
  }
  return max;
}

const char* copy_program_string(const char* text, char* out, size_t size, PageCache* cache) noexcept {
  if (!text || size == 0) return nullptr;
  const size_t n = program_strnlen(text, size - 1, cache);
  memcpy(out, text, n);
  out[n] = '\0';
  return out;
}

}  // namespace gpumemtrace
