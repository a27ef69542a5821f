// tests/dist/programs/fake_unwind.c — a "libunwind.so.8" of another version, for own_libs: the
// functions the recorder's unwinder calls, none of which unwinds.
//
// _ULx86_64_step returns 4242: the plugin that links this library sees that value only when its
// call reaches its own copy, not one the recorder brought into the process.
int _ULx86_64_step(void* cursor) { (void)cursor; return 4242; }
int _ULx86_64_init_local(void* cursor, void* context) { (void)cursor, (void)context; return -1; }
int _ULx86_64_get_reg(void* cursor, int reg, void* value) { (void)cursor, (void)reg, (void)value; return -1; }
int _ULx86_64_is_signal_frame(void* cursor) { (void)cursor; return -1; }
int _ULx86_64_set_caching_policy(void* as, int policy) { (void)as, (void)policy; return -1; }
int _Ux86_64_getcontext(void* context) { (void)context; return -1; }
int unw_backtrace(void** buffer, int size) { (void)buffer, (void)size; return 0; }
