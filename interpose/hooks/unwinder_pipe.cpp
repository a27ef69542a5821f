// interpose/hooks/unwinder_pipe.cpp — pipe and pipe2, so that libunwind makes no descriptor of its own.
//
// libunwind validates memory it is unsure of by writing it into a pipe of its own, which it opens in
// the program's descriptor table when it initialises: two descriptors the program would see (a child
// that lists its descriptors, CPython's test_subprocess; a lower RLIMIT_NOFILE), and which libunwind
// closes and opens again when the program closed them (closefrom), by then maybe on numbers of the
// program's own files. The recorder checks the memory libunwind reads itself, without a descriptor
// (interpose/recorder/unwind.cpp, checked_access_mem), so while this thread is inside libunwind for us
// (in_unwinder) the pipe is refused: libunwind goes on without it. Every other caller gets exactly what
// libc's pipe/pipe2 give: the same system call, the same errno.
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "interpose/recorder/unwind.h"

extern "C" {

int pipe2(int fds[2], int flags) {
  if (gpumemtrace::in_unwinder()) return errno = EMFILE, -1;  // errno: the recorder's caller restores it
  return static_cast<int>(syscall(SYS_pipe2, fds, flags));
}

int pipe(int fds[2]) { return pipe2(fds, 0); }

}  // extern "C"
