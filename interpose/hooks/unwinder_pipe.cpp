// interpose/hooks/unwinder_pipe.cpp — pipe and pipe2, so that libunwind's descriptors stay out of the
// program's way.
//
// libunwind validates memory it is unsure of by writing it into a pipe of its own, opened on the
// lowest free descriptor numbers on the first such unwind. When that pipe stops working (the program
// closed every descriptor, closefrom-style), libunwind closes both numbers and opens a new pipe: by
// then those numbers may be the program's own files, which it would close under the program's feet.
// While this thread is inside libunwind for us (in_unwinder), the pipe's descriptors are moved to
// high numbers, 1000 and up (move_fd_high, writer/private_fds.h), where the program does not open
// files; the writer thread's private descriptors are kept below that range, so that no number is the
// pipe's in the program's table and a file's in the writer's at once (ThreadSanitizer models one
// table). Every other caller gets exactly what libc's pipe/pipe2 give: the same system call, the same
// errno.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose/recorder/unwind.h"
#include "interpose/writer/private_fds.h"

extern "C" {

int pipe2(int fds[2], int flags) {
  const int rc = static_cast<int>(syscall(SYS_pipe2, fds, flags));
  if (rc == 0 && gpumemtrace::in_unwinder()) {
    fds[0] = gpumemtrace::move_fd_high(fds[0]);
    fds[1] = gpumemtrace::move_fd_high(fds[1]);
  }
  return rc;
}

int pipe(int fds[2]) { return pipe2(fds, 0); }

}  // extern "C"
