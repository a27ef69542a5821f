// tools/dump.h — `gpumemtrace dump PID`: what a running process's recorder has written so far, sealed
// into a trace of its own while the process goes on (tools/dump.cpp). The recorder's side answers
// through files beside its trace (interpose/writer/writer.h, Writer::serve_dump_request).
#pragma once

namespace gpumemtrace::dump {

// `gpumemtrace dump ARGS` (argv[0] is "dump"). Returns the exit status: 0 dumped (the dump's path on
// standard output), 1 the recorder refused or did not answer, 2 bad usage or no traced process.
int main(int argc, char** argv);

}  // namespace gpumemtrace::dump
