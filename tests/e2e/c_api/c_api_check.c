/* tests/e2e/c_api/c_api_check.c — include/gpumemtrace.h compiles as strict C after another libc
   header (no _GNU_SOURCE), and every call is a no-op without the recorder: this program must print
   "ok" and exit 0 without LD_PRELOAD. */
#include <stdio.h>

#include "gpumemtrace.h"

int main(void) {
  static char segment[4096];
  gpumemtrace_mark("start");
  gpumemtrace_block_alloc(segment + 512, 100, segment, 0, "pool");
  gpumemtrace_block_free(segment + 512, 100, segment, 0, "pool");
  gpumemtrace_block_oom(1u << 30, 0, "pool");
  gpumemtrace_scope_begin("scope");
  gpumemtrace_scope_end("scope");
  printf("ok\n");
  return 0;
}
