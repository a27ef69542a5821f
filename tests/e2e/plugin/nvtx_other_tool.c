// tests/e2e/plugin/nvtx_other_tool.c — a stand-in for another NVTX tool (Nsight Systems): named by
// NVTX_INJECTION64_PATH, it counts the pushes it is given and says so on stderr, so that a test can
// check that it, not gpumemtrace, got the program's NVTX calls.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>

static int g_pushes;

static int count_push(const char* message) {
  (void)message;
  return g_pushes++;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const NvtxExportTableCallbacks* callbacks = (const NvtxExportTableCallbacks*)get_table(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable table = 0;
  unsigned size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
      size <= NVTX_CBID_CORE_RangePushA)
    return 0;
  *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)count_push;
  fprintf(stderr, "other NVTX tool: attached\n");
  return 1;
}

__attribute__((destructor)) static void report_pushes(void) {
  fprintf(stderr, "other NVTX tool: %d pushes\n", g_pushes);
}
