// interpose/recorder/program_strings.h — reading a string the program hands us (a mark's label, a scope
// name, a pool name, an NVTX message, PyTorch's action and frame names) without ever faulting.
//
// Those pointers come from the program, and a C caller may pass one that is not NUL-terminated before
// an unmapped or inaccessible page (a buffer at the end of a mapping, a string in a guard-paged
// arena). Reading such a string byte by byte would crash the program in our code. So a page is read
// only once the kernel has confirmed it readable (process_vm_readv of one byte of it, which fails with
// EFAULT where a load would fault); the bytes before the first unreadable page are the string, cut
// there. Where the kernel refuses process_vm_readv (a seccomp filter), mincore() tells an unmapped
// page; an inaccessible but mapped one (PROT_NONE) is then still read.
//
// Cost: one system call per page a string touches, less those the PageCache already confirmed (the
// PyTorch bridge passes thousands of names from a few pages in one call). No allocation, no lock.
// Thread-safety: any thread; a PageCache belongs to one call on one thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumemtrace {

// Whether the page at `page` (page-aligned) can be read, asked of the kernel without touching it
// (as described above). Keeps errno. Also the unwinder's check before it reads a word libunwind asks
// for (unwind.cpp).
bool page_readable(uintptr_t page) noexcept;
// In a fork child: the process id page_readable keeps is the parent's. Async-signal-safe.
void forget_pid() noexcept;

// The seccomp probe found that the kernel kills a process making process_vm_readv (`readv` false) or
// mincore (`mincore` false): page_readable does without them. Without both, every page is taken for
// unreadable (a name is cut, a stack ends where libunwind was unsure). thread_check.h.
void restrict_page_checks(bool readv, bool mincore) noexcept;

// The last few pages confirmed readable, for one call that reads many strings.
class PageCache {
 public:
  bool readable(uintptr_t page);

 private:
  static constexpr int kEntries = 32;
  uintptr_t pages_[kEntries] = {};
  int next_ = 0;
};

// How many of the `max` bytes from `p` lie on readable pages (all of them, or up to the first
// unreadable page).
size_t program_readable_bytes(const void* p, size_t max, PageCache* cache = nullptr) noexcept;

// The length of the string at `text`, at most `max`: up to its NUL, or up to the first byte on a page
// that cannot be read. 0 for null.
size_t program_strnlen(const char* text, size_t max, PageCache* cache = nullptr) noexcept;

// Copies the string at `text` into `out` (`size` bytes, NUL-terminated, cut as program_strnlen cuts
// it at size - 1); returns `out`, or null when `text` is null.
const char* copy_program_string(const char* text, char* out, size_t size, PageCache* cache = nullptr) noexcept;

}  // namespace gpumemtrace
