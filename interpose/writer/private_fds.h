// interpose/writer/private_fds.h — a descriptor table of the writer thread's own.
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
// below 1000 (half the descriptor limit, when that is lower) refers to /dev/null: the writer's files
// land where they always did, on numbers the program seldom uses, so that code tracking descriptors by
// number for the whole process (ThreadSanitizer; a preloaded library that wraps close) does not take
// them for the program's; and a library running in the writer that writes to "stderr" reaches no file
// of the writer's. The writer's own warnings go to the program's stderr through a program thread
// (recorder.h, log_line).
//
// Thread-safety: called once, by the writer thread, before it opens anything.
#pragma once

namespace gpumemtrace {

enum class FdTable {
  Private,  // the calling thread has a table of its own, holding /dev/null below 1000 and nothing else
  Shared,   // the kernel refused (a seccomp filter, e.g. a container's default profile): unchanged
};

FdTable make_private_fd_table() noexcept;

}  // namespace gpumemtrace
