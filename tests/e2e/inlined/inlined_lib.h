// tests/e2e/inlined/inlined_lib.h — libinlined_lib.so: an allocation inlined two levels deep inside a
// shared library (tests/e2e/inlined/inlined_lib.cpp), for tests/e2e/test_inlined_frames.py.
#pragma once

#include <cstddef>

// Allocates `megabytes` MiB with cudaMalloc through two inlined levels; never freed.
extern "C" void* lib_alloc_workspace(int megabytes);
