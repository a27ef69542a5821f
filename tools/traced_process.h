// tools/traced_process.h — finding the trace a running process's recorder writes, for the launcher's
// commands that take a PID (`gpumemtrace top`, `gpumemtrace dump`): from /proc, no help from the
// recorder.
#pragma once

#include <string>

namespace gpumemtrace::tools {

// True while process `pid` exists (one of another user's too).
bool process_alive(long pid);

// The trace of process `pid`, or of its first descendant that has one (breadth first): so the pid
// of `gpumemtrace run` itself, or of a shell that started the program, finds the program's trace.
// Sets `*traced` to the process found. "" with `*why` (one line) when there is none.
std::string trace_of_process(long pid, long* traced, std::string* why);

}  // namespace gpumemtrace::tools
