// tests/e2e/programs/nvtx_heap.c — a sub-allocator that describes itself with the NVTX memory
// extension alone (nvToolsExtMem.h, header-only, no gpumemtrace header), for
// tests/e2e/test_nvtx_memory_e2e.py.
//
//   cudaMalloc 8 MiB pool, registered as heap "arena" over its whole range
//   regions: pool+0 1 MiB, pool+1 MiB 2 MiB, pool+4 MiB 512 KiB, pool+6 MiB 256 KiB
//   unregister pool+0 (by pointer) and pool+4 MiB (by handle); resize pool+6 MiB to 1 MiB
//   a second heap, unnamed, without a range: one 4 KiB region in the pool's tail, then heap reset
//   the pool stays allocated: at exit pool+1 MiB (2 MiB) and pool+6 MiB (1 MiB) are live regions
// Prints "pool 0x..." and exits 1 when a CUDA call fails.
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExtMem.h>
#include <stdio.h>

#define MIB (1024u * 1024u)

static nvtxMemRegionHandle_t register_region(nvtxMemHeapHandle_t heap, char* at, size_t size) {
  nvtxMemVirtualRangeDesc_t range = {size, at};
  nvtxMemRegionHandle_t handle = NULL;
  nvtxMemRegionsRegisterBatch_t batch = {NVTX_EXT_COMPATID_MEM, sizeof(batch), NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
                                         heap, 1, sizeof(range), &range, &handle};
  nvtxMemRegionsRegister(NULL, &batch);
  return handle;
}

static void unregister_region(uint32_t ref_type, nvtxMemRegionRef_t ref) {
  nvtxMemRegionsUnregisterBatch_t batch = {NVTX_EXT_COMPATID_MEM, sizeof(batch), ref_type, 1, sizeof(ref), &ref};
  nvtxMemRegionsUnregister(NULL, &batch);
}

int main(void) {
  char* pool = NULL;
  if (cudaMalloc((void**)&pool, 8 * MIB) != cudaSuccess) return 1;
  printf("pool %p\n", (void*)pool);

  nvtxMemVirtualRangeDesc_t whole = {8 * MIB, pool};
  nvtxMemHeapDesc_t arena_desc = {0};
  arena_desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  arena_desc.structSize = sizeof(arena_desc);
  arena_desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  arena_desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  arena_desc.typeSpecificDescSize = sizeof(whole);
  arena_desc.typeSpecificDesc = &whole;
  arena_desc.messageType = NVTX_MESSAGE_TYPE_ASCII;
  arena_desc.message.ascii = "arena";
  nvtxMemHeapHandle_t arena = nvtxMemHeapRegister(NULL, &arena_desc);

  nvtxMemRegionRef_t first = {.pointer = pool};
  register_region(arena, pool, 1 * MIB);
  register_region(arena, pool + 1 * MIB, 2 * MIB);
  nvtxMemRegionRef_t third = {.handle = register_region(arena, pool + 4 * MIB, 512 * 1024)};
  register_region(arena, pool + 6 * MIB, 256 * 1024);
  unregister_region(NVTX_MEM_REGION_REF_TYPE_POINTER, first);
  unregister_region(NVTX_MEM_REGION_REF_TYPE_HANDLE, third);

  nvtxMemVirtualRangeDesc_t grown = {1 * MIB, pool + 6 * MIB};
  nvtxMemRegionsResizeBatch_t resize = {NVTX_EXT_COMPATID_MEM, sizeof(resize), NVTX_MEM_TYPE_VIRTUAL_ADDRESS,
                                        1, sizeof(grown), &grown};
  nvtxMemRegionsResize(NULL, &resize);

  nvtxMemHeapDesc_t scratch_desc = {0};
  scratch_desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  scratch_desc.structSize = sizeof(scratch_desc);
  scratch_desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  nvtxMemHeapHandle_t scratch = nvtxMemHeapRegister(NULL, &scratch_desc);
  register_region(scratch, pool + 7 * MIB + 512 * 1024, 4096);
  nvtxMemHeapReset(NULL, scratch);
  nvtxMemHeapUnregister(NULL, scratch);
  return 0;
}
