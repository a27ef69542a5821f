// tests/dist/programs/unwind_plugin.c — a plugin that links libunwind.so.8 (the fake) and calls it,
// dlopen'ed by own_libs after start, as Python loads an extension module: its undefined symbols are
// looked up in the process's global scope first, where a preloaded library's exports and
// dependencies sit.
int _ULx86_64_step(void* cursor);

int plugin_unwind_step(void) { return _ULx86_64_step(0); }
