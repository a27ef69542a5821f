/* tests/e2e/c_api/c_api_check.c — include/gpumemtrace.h compiles as strict C after another libc
   header (no _GNU_SOURCE), and every call is a no-op without the recorder: this program must print
   "ok" and exit 0 without LD_PRELOAD, and with it (where the control calls answer as the recorder
   does: a pause and a resume that change the state, a dump refused with a reason). */
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
  char message[64] = "unchanged";
  /* Neither an existing directory nor, whatever the trace's compression, a name it accepts. */
  const char* refused = "/proc/no-such-dir/dump.jsonl.zst";
  if (!dlsym(GPUMEMTRACE_RTLD_DEFAULT_, "gpumemtrace_report_pause")) {
    if (gpumemtrace_pause() != -1 || gpumemtrace_resume() != -1 ||
        gpumemtrace_dump(refused, 1000, message, sizeof message) != -1 || message[0] != '\0') {
      printf("a control call did something without the recorder\n");
      return 1;
    }
  } else if (gpumemtrace_pause() != 1 || gpumemtrace_pause() != 0 || gpumemtrace_resume() != 1 ||
             gpumemtrace_dump(refused, 1000, message, sizeof message) != 1 || message[0] == '\0') {
    printf("a control call answered otherwise than the recorder does: %s\n", message);
    return 1;
  }
  printf("ok\n");
  return 0;
}
