// interpose/writer/private_fds.h — the recorder's own descriptors: a descriptor table of the writer
// thread's own, and the numbers the recorder's descriptors take in each table.
//
// The writer opens files: the trace, /proc/self/maps and the libraries' ELF and debug files (libdwfl,
// some for a moment, some for good). In the program's table each would land on the lowest free number
// until it is moved high, and a program that closes every descriptor (closefrom, close_range) and
// opens a file of its own in that moment could have its file closed, or read, by the writer. With a
// table of its own (Linux: unshare(CLONE_FILES)) the writer's numbers and the program's are
// different tables: the program can neither close nor reuse the writer's files, and the writer never
// touches one of the program's.
//
// The private table starts as a copy of the program's; every copy is closed at once (kept, a copy of
// the write end of a pipe would keep the program's reader from ever seeing EOF). Then every number
// below the writer's range (own_descriptor_ranges) refers to /dev/null, so that the writer's files
// land in that range, and a library running in the writer that writes to "stderr" reaches no file of
// the writer's. The writer's own warnings go to the program's stderr through a program thread
// (recorder.h, log_line).
//
// Numbers. Two tables, but code that tracks descriptors by number for the whole process
// (ThreadSanitizer; a preloaded library that wraps close) sees one: a number in use in both tables at
// once looks like one file used by two threads. So the recorder keeps its descriptors in two ranges
// that do not meet (own_descriptor_ranges): in the program's table (everything of the writer's when it
// shares that table; libunwind makes no pipe there: interpose/hooks/unwinder_pipe.cpp) from
// 1000 up, where programs seldom have files; in the writer's private table below that, 500 to 999.
//
// Thread-safety: make_private_fd_table is called once, by the writer thread, before it opens anything.
// move_fd_high may be called by any thread; it acts on the calling thread's table.
#pragma once

#include <sys/resource.h>

namespace gpumemtrace {

// The first number of each range, for a descriptor limit (RLIMIT_NOFILE) of `limit`:
//   program_table: 1000, or the top 16 numbers below the limit when it is under 1016 (at least 3);
//   writer_table:  half of program_table (at least 3, so never stdin, stdout or stderr).
// The writer's range ends where the program table's begins: the writer's files stay below it as long
// as the writer holds fewer than program_table - writer_table of them at once (500; 24 with a limit of
// 64), which libdwfl's one open file per symbolized module does not approach. (Past that a file of the
// writer's lands higher, still in its own table: only the number is shared.)
struct OwnDescriptorRanges {
  int program_table;
  int writer_table;
};
OwnDescriptorRanges own_descriptor_ranges(rlim_t limit) noexcept;

enum class FdTable {
  Private,  // the calling thread has a table of its own, holding /dev/null below the writer's range
  Shared,   // the kernel refused (a seccomp filter, e.g. a container's default profile): unchanged
};

FdTable make_private_fd_table() noexcept;

// Moves `fd` to the lowest free number of the recorder's range in the calling thread's table (the
// writer's private range after make_private_fd_table returned Private on this thread, else the
// program table's), close-on-exec, and closes the original. Returns the new descriptor, or `fd` itself
// when it is already in the range or no number there is free. Programs hand out low numbers: ours
// stay out of their way. Keeps errno.
int move_fd_high(int fd) noexcept;

}  // namespace gpumemtrace
