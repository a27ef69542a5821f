// interpose/hooks/nvtx_memory.cpp — the NVTX memory extension (nvToolsExtMem.h: the heaps and regions
// that sub-allocators register for compute-sanitizer) as block events, like the custom allocator API's.
//
// How NVTX reaches us: an extension call's first use makes that NVTX copy dlopen() the injection
// library (NVTX_INJECTION64_PATH, which nvtx.cpp points at this library) and call its
// InitializeInjectionNvtxExtension(module info); attach_nvtx_memory() fills the module's function
// slots, indexed by NVTX3EXT_CBID_*.
//
// Events (kind "block"; device: the calling thread's current device):
//   nvtxMemRegionsRegister    block_alloc per region: addr, size, segment = the heap's start when the
//                             heap was registered with a virtual address range, pool = the heap's
//                             name (its message) or "nvtx heap 0x<start>"
//   nvtxMemRegionsResize      block_free then block_alloc of the region with its new size
//   nvtxMemRegionsUnregister  block_free per region
//   nvtxMemHeapReset          block_free of each live region of the heap
//   nvtxMemHeapUnregister     the same; the heap's handle is then free for reuse
// Heap registration itself records nothing: the memory under it was recorded when it was allocated.
//
// Limits: fixed tables, no malloc. kHeapSlots heaps are named and carry their range; heaps beyond
// them share one unnamed heap without a segment. kRegionSlots regions are remembered; a region that
// finds no slot within kProbes is still recorded, and its block_free carries size 0 (the analyzer
// finds the block by address). Region names, permissions and the CUDA-specific calls are not used.
//
// Thread-safety: slots are claimed by CAS on their key and written before the handle (heap) or the
// registration call (region) returns; the calls that read them (unregister, reset) cannot come
// before that. A reset or unregistration racing a registration into the same heap is a program
// error that NVTX leaves undefined; here the racing region may be missed.
#include "interpose/hooks/nvtx_memory.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <utility>

#include "interpose/hooks/driver_query.h"
#include "interpose/hooks/runtime_query.h"
#include "interpose/recorder/recorder.h"

namespace f = gpumemtrace::format;
using gpumemtrace::HookScope;

namespace {

constexpr size_t kPoolNameBytes = 48;  // what a block event keeps of its pool name (with the NUL)
constexpr size_t kHeapSlots = 256;
constexpr size_t kRegionSlots = 16384;
constexpr size_t kProbes = 16;

struct Heap {
  std::atomic<bool> used;
  uint64_t start;  // 0: registered without a virtual address range
  char pool[kPoolNameBytes];
};
Heap g_heaps[kHeapSlots];
// Regions of nvtxMemHeapHandle_t 0 (NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE), and of heaps that found no slot.
Heap g_process_wide{{true}, 0, "nvtx process-wide heap"};
Heap g_overflow_heap{{true}, 0, "nvtx heap (heap table full)"};

struct Region {
  std::atomic<uint64_t> addr;  // 0: free
  std::atomic<uint64_t> size;
  std::atomic<const Heap*> heap;
};
Region g_regions[kRegionSlots];

// ---- recording ----

void record_block(f::Op op, const char* api, uint64_t addr, uint64_t size, const Heap& heap) {
  HookScope scope;
  if (!scope.recording()) return;
  gpumemtrace::KeepErrno keep_errno;  // the device query below is ours, not the program's
  gpumemtrace::EventFacts e = gpumemtrace::event::block(op, api, addr, size, heap.start,
                                                        gpumemtrace::kCurrentDevice, heap.pool);
  // The driver's answer first (a program may use the driver API alone), else the runtime's.
  gpumemtrace::resolve_device(&e, gpumemtrace::driver::kDriverQueries);
  if (e.device < 0) {
    e.device = gpumemtrace::kCurrentDevice;
    gpumemtrace::resolve_device(&e, gpumemtrace::runtime::kRuntimeQueries);
  }
  (void)gpumemtrace::record(e);  // a dropped event is counted by the recorder
}

// ---- heaps ----

// The heap behind a handle we gave out; the process-wide heap for null and for handles not ours.
Heap& heap_of(nvtxMemHeapHandle_t handle) {
  Heap* const heap = reinterpret_cast<Heap*>(handle);
  if (heap == &g_overflow_heap) return g_overflow_heap;
  for (Heap& h : g_heaps)  // a pointer compare per slot: handles from another tool are not trusted
    if (&h == heap) return h;
  return g_process_wide;
}

// "nvtx heap 0x<start>" into `out` (kPoolNameBytes), without stdio.
void name_by_address(char* out, uint64_t start) {
  static const char kPrefix[] = "nvtx heap 0x";
  memcpy(out, kPrefix, sizeof(kPrefix) - 1);
  char* p = out + sizeof(kPrefix) - 1;
  int shift = 60;
  while (shift > 0 && ((start >> shift) & 0xF) == 0) shift -= 4;
  for (; shift >= 0; shift -= 4) *p++ = "0123456789abcdef"[(start >> shift) & 0xF];
  *p = '\0';
}

nvtxMemHeapHandle_t HeapRegister(nvtxDomainHandle_t, const nvtxMemHeapDesc_t* desc) {
  Heap* heap = &g_overflow_heap;
  for (Heap& h : g_heaps) {
    bool free_slot = false;
    if (h.used.compare_exchange_strong(free_slot, true, std::memory_order_acq_rel)) {
      heap = &h;
      break;
    }
  }
  if (heap == &g_overflow_heap) return reinterpret_cast<nvtxMemHeapHandle_t>(heap);
  heap->start = 0;
  if (desc && desc->type == NVTX_MEM_TYPE_VIRTUAL_ADDRESS && desc->typeSpecificDesc &&
      desc->typeSpecificDescSize >= sizeof(nvtxMemVirtualRangeDesc_t)) {
    const auto* range = static_cast<const nvtxMemVirtualRangeDesc_t*>(desc->typeSpecificDesc);
    heap->start = reinterpret_cast<uint64_t>(range->ptr);
  }
  const char* name = desc ? gpumemtrace::nvtx_interned_message(static_cast<int32_t>(desc->messageType),
                                                               desc->message)
                          : nullptr;
  if (name) {
    strncpy(heap->pool, name, kPoolNameBytes - 1);
    heap->pool[kPoolNameBytes - 1] = '\0';
  } else {
    name_by_address(heap->pool, heap->start ? heap->start : reinterpret_cast<uint64_t>(heap));
  }
  return reinterpret_cast<nvtxMemHeapHandle_t>(heap);
}

// ---- regions ----

size_t home_slot(uint64_t addr) { return static_cast<size_t>((addr >> 4) * 0x9E3779B97F4A7C15ull >> 50); }
static_assert(kRegionSlots == size_t{1} << 14, "home_slot() keeps the hash's top 14 bits");

void remember_region(uint64_t addr, uint64_t size, const Heap& heap) {
  for (size_t probe = 0; probe < kProbes; ++probe) {
    Region& r = g_regions[(home_slot(addr) + probe) % kRegionSlots];
    uint64_t free_slot = 0;
    if (r.addr.compare_exchange_strong(free_slot, addr, std::memory_order_acq_rel)) {
      r.size.store(size, std::memory_order_relaxed);
      r.heap.store(&heap, std::memory_order_release);
      return;
    }
  }
}

// Forgets the region at `addr`; its size, 0 when it was not remembered.
uint64_t forget_region(uint64_t addr) {
  for (size_t probe = 0; probe < kProbes; ++probe) {
    Region& r = g_regions[(home_slot(addr) + probe) % kRegionSlots];
    if (r.addr.load(std::memory_order_acquire) == addr) {
      const uint64_t size = r.size.load(std::memory_order_relaxed);
      r.addr.store(0, std::memory_order_release);
      return size;
    }
  }
  return 0;
}

const Heap& heap_of_region(uint64_t addr) {
  for (size_t probe = 0; probe < kProbes; ++probe) {
    Region& r = g_regions[(home_slot(addr) + probe) % kRegionSlots];
    if (r.addr.load(std::memory_order_acquire) == addr) return *r.heap.load(std::memory_order_acquire);
  }
  return g_process_wide;
}

// The i-th element of a batch whose elements are `element_size` bytes apart (the caller's struct may
// be newer, hence larger, than ours); null when the size is too small to hold a T.
template <typename T>
const T* element(const void* elements, size_t element_size, size_t i) {
  if (!elements || element_size < sizeof(T)) return nullptr;
  return reinterpret_cast<const T*>(static_cast<const char*>(elements) + i * element_size);
}

void RegionsRegister(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t* batch) {
  if (!batch || batch->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) return;
  const Heap& heap = heap_of(batch->heap);
  for (size_t i = 0; i < batch->regionCount; ++i) {
    const auto* region = element<nvtxMemVirtualRangeDesc_t>(batch->regionDescElements,
                                                            batch->regionDescElementSize, i);
    if (!region) return;
    const uint64_t addr = reinterpret_cast<uint64_t>(region->ptr);
    // The region's handle is its address: unregistration by pointer or by handle find the same slot.
    if (batch->regionHandleElementsOut)
      batch->regionHandleElementsOut[i] = reinterpret_cast<nvtxMemRegionHandle_t>(const_cast<void*>(region->ptr));
    remember_region(addr, region->size, heap);
    record_block(f::Op::BlockAlloc, "nvtxMemRegionsRegister", addr, region->size, heap);
  }
}

void RegionsResize(nvtxDomainHandle_t, const nvtxMemRegionsResizeBatch_t* batch) {
  if (!batch || batch->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) return;
  for (size_t i = 0; i < batch->regionDescCount; ++i) {
    const auto* region = element<nvtxMemVirtualRangeDesc_t>(batch->regionDescElements,
                                                            batch->regionDescElementSize, i);
    if (!region) return;
    const uint64_t addr = reinterpret_cast<uint64_t>(region->ptr);
    const Heap& heap = heap_of_region(addr);
    record_block(f::Op::BlockFree, "nvtxMemRegionsResize", addr, forget_region(addr), heap);
    remember_region(addr, region->size, heap);
    record_block(f::Op::BlockAlloc, "nvtxMemRegionsResize", addr, region->size, heap);
  }
}

void RegionsUnregister(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t* batch) {
  if (!batch) return;
  for (size_t i = 0; i < batch->refCount; ++i) {
    const auto* ref = element<nvtxMemRegionRef_t>(batch->refElements, batch->refElementSize, i);
    if (!ref) return;
    // Pointer and handle are the same address (RegionsRegister hands out the address as the handle).
    const uint64_t addr = reinterpret_cast<uint64_t>(ref->pointer);
    const Heap& heap = heap_of_region(addr);
    // Recorded before the slot is freed: the free comes before any reuse of the address.
    record_block(f::Op::BlockFree, "nvtxMemRegionsUnregister", addr, forget_region(addr), heap);
  }
}

// block_free of every remembered region of `heap` (a scan of the region table: resets are rare).
void free_regions_of(const Heap& heap, const char* api) {
  for (Region& r : g_regions) {
    const uint64_t addr = r.addr.load(std::memory_order_acquire);
    if (addr == 0 || r.heap.load(std::memory_order_acquire) != &heap) continue;
    const uint64_t size = r.size.load(std::memory_order_relaxed);
    record_block(f::Op::BlockFree, api, addr, size, heap);
    r.addr.store(0, std::memory_order_release);
  }
}

void HeapReset(nvtxDomainHandle_t, nvtxMemHeapHandle_t handle) { free_regions_of(heap_of(handle), "nvtxMemHeapReset"); }

void HeapUnregister(nvtxDomainHandle_t, nvtxMemHeapHandle_t handle) {
  Heap& heap = heap_of(handle);
  free_regions_of(heap, "nvtxMemHeapUnregister");
  if (&heap != &g_process_wide && &heap != &g_overflow_heap) heap.used.store(false, std::memory_order_release);
}

template <typename Function>
intptr_t slot_value(Function function) {
  return reinterpret_cast<intptr_t>(function);
}

}  // namespace

namespace gpumemtrace {

bool attach_nvtx_memory(nvtxExtModuleInfo_t* module) noexcept {
  if (!module || module->moduleId != NVTX_EXT_MODULEID_MEM || module->compatId != NVTX_EXT_COMPATID_MEM ||
      module->segmentsCount < 1 || !module->segments)
    return false;
  const std::pair<unsigned, intptr_t> entries[] = {
      {NVTX3EXT_CBID_nvtxMemHeapRegister, slot_value(HeapRegister)},
      {NVTX3EXT_CBID_nvtxMemHeapUnregister, slot_value(HeapUnregister)},
      {NVTX3EXT_CBID_nvtxMemHeapReset, slot_value(HeapReset)},
      {NVTX3EXT_CBID_nvtxMemRegionsRegister, slot_value(RegionsRegister)},
      {NVTX3EXT_CBID_nvtxMemRegionsResize, slot_value(RegionsResize)},
      {NVTX3EXT_CBID_nvtxMemRegionsUnregister, slot_value(RegionsUnregister)},
  };
  nvtxExtModuleSegment_t& segment = module->segments[0];
  if (!segment.functionSlots) return false;
  for (const auto& [id, function] : entries)
    if (id < segment.slotCount) segment.functionSlots[id] = function;
  return true;
}

}  // namespace gpumemtrace
