// tests/e2e/inlined/lto_part.h — the functions of lto_part.cpp that link-time optimization inlines
// into lto_main.cpp.
#pragma once

#include <cstddef>

extern size_t g_lto_steps;
void* lto_grab(size_t bytes);
void* lto_plan(int megabytes);
