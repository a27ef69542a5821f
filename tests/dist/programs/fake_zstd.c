// tests/dist/programs/fake_zstd.c — a "libzstd.so.1" of another version, for own_libs: every function
// the recorder's writer calls is here, and none of them compresses.
//
// A recorder that bound to this copy (a shared libzstd found by soname, or a symbol lookup that
// reaches the program's library) would write no trace; ZSTD_versionNumber tells the program that
// it got its own.
#include <stddef.h>

unsigned ZSTD_versionNumber(void) { return 99999; }
size_t ZSTD_CStreamOutSize(void) { return 0; }
void* ZSTD_createCCtx(void) { return NULL; }
size_t ZSTD_freeCCtx(void* cctx) { (void)cctx; return 0; }
size_t ZSTD_compressStream2(void* cctx, void* out, void* in, int mode) {
  (void)cctx, (void)out, (void)in, (void)mode;
  return (size_t)-1;
}
unsigned ZSTD_isError(size_t code) { return code > (size_t)-120; }
const char* ZSTD_getErrorName(size_t code) { (void)code; return "the program's own fake libzstd"; }
