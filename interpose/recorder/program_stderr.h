// interpose/recorder/program_stderr.h — where the recorder's lines may go, and which process says
// where its trace goes.
//
// The recorder writes its lines to descriptor 2, but only while that descriptor is still the stderr
// the program started with (the same device and inode as when the library was loaded): a program
// that closed its stderr and then opened a file gets that file on descriptor 2, and a line of ours
// would land in it. Then, and when there was no stderr at load, the line is dropped. (Where a seccomp
// filter refuses fstat, an open descriptor 2 is taken for the program's stderr: nothing says otherwise.)
//
// Thread-safety: remember_program_stderr() runs once, when the library is loaded (before the
// program's threads); the rest from any thread, async-signal-safe (fstat, ioctl, open, read).
#pragma once

#include "interpose/recorder/config.h"

namespace gpumemtrace {

// Notes which file descriptor 2 refers to now. Called when the library is loaded.
void remember_program_stderr() noexcept;

// True while descriptor 2 still refers to the file it referred to when the library was loaded.
bool stderr_is_the_programs() noexcept;

// Whether this process says where its trace goes (Config::verbose): On, or Auto and its stderr is
// a terminal and its parent process is not traced (does not have this library loaded). Off: no.
bool says_where_its_trace_goes(Verbosity verbose) noexcept;

}  // namespace gpumemtrace
