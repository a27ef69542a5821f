// util/runs_before_sanitizers.h — marks code a sanitizer's runtime may run before it is initialised.
//
// A sanitizer's runtime (make asan, make tsan) calls functions the recorder interposes while it
// initialises, before instrumented code can run (its shadow memory, its thread state are not there
// yet): dlsym, to look its own interceptors up (interpose/hooks/dlsym.cpp), and sigaction, to install
// its handlers for deadly signals (interpose/hooks/signals.cpp). Code on those paths is never
// instrumented. Nothing in it may call an instrumented function.
#pragma once

#define GPUMEMTRACE_RUNS_BEFORE_SANITIZERS __attribute__((no_sanitize("address", "thread", "undefined")))
