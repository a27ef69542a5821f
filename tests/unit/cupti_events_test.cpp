// tests/unit/cupti_events_test.cpp — CUPTI callback and activity-record handling (cupti/cupti_events.h)
// with hand-built CUpti_CallbackData, parameter structs and CUpti_ActivityMemory4 / MemoryPool3
// buffers: CUPTI itself cannot run without a GPU.
#include "cupti/cupti_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace gmt = gpumemtrace;
namespace f = gpumemtrace::format;
using gmt::cupti::driver_callback_facts;

namespace {

CUpti_CallbackData callback(CUpti_ApiCallbackSite site, void* params, CUresult* ret) {
  CUpti_CallbackData cb{};
  cb.callbackSite = site;
  cb.functionParams = params;
  cb.functionReturnValue = ret;
  return cb;
}

TEST(CuptiCallbacks, AllocationAtExitWithAddressSizeAndResult) {
  CUdeviceptr ptr = 0x7f0000200000;
  cuMemAlloc_v2_params p{&ptr, 3145735};
  CUresult ok = CUDA_SUCCESS;
  gmt::EventFacts e;
  auto enter = callback(CUPTI_API_ENTER, &p, nullptr);
  EXPECT_FALSE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, enter, nullptr, 0, &e));
  auto exit = callback(CUPTI_API_EXIT, &p, &ok);
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, exit, nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Alloc);
  EXPECT_EQ(e.kind, f::Kind::Device);
  EXPECT_STREQ(e.api, "cuMemAlloc_v2");
  EXPECT_EQ(e.driver_api, nullptr);
  EXPECT_EQ(e.addr, 0x7f0000200000u);
  EXPECT_EQ(e.size, 3145735u);
  EXPECT_EQ(e.result, 0);
  EXPECT_TRUE(e.has_result);
  EXPECT_EQ(e.device, 0);
}

TEST(CuptiCallbacks, RuntimeAttributionGivesBothNames) {
  CUdeviceptr ptr = 0x1000;
  cuMemAlloc_v2_params p{&ptr, 4096};
  CUresult ok = CUDA_SUCCESS;
  const char* runtime = gmt::cupti::runtime_api_name(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
  ASSERT_STREQ(runtime, "cudaMalloc");
  gmt::EventFacts e;
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, callback(CUPTI_API_EXIT, &p, &ok),
                                    runtime, 1, &e));
  EXPECT_STREQ(e.api, "cudaMalloc");
  EXPECT_STREQ(e.driver_api, "cuMemAlloc_v2");
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(gmt::cupti::runtime_api_name(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), nullptr);
}

TEST(CuptiCallbacks, FailedAllocationKeepsRequestedSizeAndNoAddress) {
  CUdeviceptr ptr = 0xdeadbeef;  // garbage the driver left: must not be reported
  cuMemAlloc_v2_params p{&ptr, 64ull << 30};
  CUresult oom = CUDA_ERROR_OUT_OF_MEMORY;
  gmt::EventFacts e;
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, callback(CUPTI_API_EXIT, &p, &oom),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.result, 2);
  EXPECT_EQ(e.addr, 0u);
  EXPECT_EQ(e.size, 64ull << 30);
}

TEST(CuptiCallbacks, FreeAtEnterWithoutResult) {
  cuMemFree_v2_params p{0x7f0000200000};
  CUresult ok = CUDA_SUCCESS;
  gmt::EventFacts e;
  EXPECT_FALSE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, callback(CUPTI_API_EXIT, &p, &ok),
                                     nullptr, 0, &e));
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, callback(CUPTI_API_ENTER, &p, nullptr),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Free);
  EXPECT_EQ(e.addr, 0x7f0000200000u);
  EXPECT_FALSE(e.has_result);
  cuMemFree_v2_params null_free{0};
  EXPECT_FALSE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
                                     callback(CUPTI_API_ENTER, &null_free, nullptr), nullptr, 0, &e));
}

TEST(CuptiCallbacks, AsyncFromPoolCarriesStreamAndPool) {
  CUdeviceptr ptr = 0x2000;
  cuMemAllocFromPoolAsync_ptsz_params p{&ptr, 2097157, reinterpret_cast<CUmemoryPool>(0x9900),
                                        reinterpret_cast<CUstream>(0x5000)};
  CUresult ok = CUDA_SUCCESS;
  gmt::EventFacts e;
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
                                    callback(CUPTI_API_EXIT, &p, &ok), nullptr, 0, &e));
  EXPECT_STREQ(e.api, "cuMemAllocFromPoolAsync_ptsz");
  EXPECT_EQ(e.kind, f::Kind::Async);
  EXPECT_TRUE(e.has_stream && e.has_pool);
  EXPECT_EQ(e.stream, 0x5000u);
  EXPECT_EQ(e.pool, 0x9900u);

  cuMemPoolTrimTo_params t{reinterpret_cast<CUmemoryPool>(0x9900), 1 << 20};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, callback(CUPTI_API_EXIT, &t, &ok),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Trim);
  EXPECT_EQ(e.size, 1u << 20);
  EXPECT_EQ(e.pool, 0x9900u);
}

TEST(CuptiCallbacks, VirtualMemoryPattern) {
  CUresult ok = CUDA_SUCCESS;
  gmt::EventFacts e;
  CUdeviceptr va = 0x7e0000000000;
  cuMemAddressReserve_params r{&va, 32 << 20, 0, 0, 0};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, callback(CUPTI_API_EXIT, &r, &ok),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Reserve);
  EXPECT_EQ(e.kind, f::Kind::Virtual);
  EXPECT_EQ(e.addr, va);

  CUmemGenericAllocationHandle h = 0x1010;
  CUmemAllocationProp prop{};
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 3;
  cuMemCreate_params c{&h, 4 << 20, &prop, 0};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, callback(CUPTI_API_EXIT, &c, &ok), nullptr,
                                    -1, &e));
  EXPECT_EQ(e.op, f::Op::Alloc);
  EXPECT_EQ(e.kind, f::Kind::Physical);
  EXPECT_EQ(e.addr, 0x1010u);
  EXPECT_TRUE(e.has_handle);
  EXPECT_EQ(e.device, 3);  // from the allocation's properties, not the current context

  cuMemMap_params m{va, 4 << 20, 0, h, 0};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemMap, callback(CUPTI_API_EXIT, &m, &ok), nullptr, 0,
                                    &e));
  EXPECT_EQ(e.op, f::Op::Map);
  EXPECT_EQ(e.handle, 0x1010u);
  cuMemUnmap_params u{va, 4 << 20};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, callback(CUPTI_API_ENTER, &u, nullptr),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Unmap);
  cuMemRelease_params rel{h};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, callback(CUPTI_API_ENTER, &rel, nullptr),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Free);
  EXPECT_EQ(e.kind, f::Kind::Physical);
  EXPECT_EQ(e.addr, 0x1010u);
  cuMemAddressFree_params af{va, 32 << 20};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, callback(CUPTI_API_ENTER, &af, nullptr),
                                    nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Unreserve);
  EXPECT_EQ(e.size, 32u << 20);
}

TEST(CuptiCallbacks, ResetAndUnknownIds) {
  gmt::EventFacts e;
  cuDevicePrimaryCtxReset_v2_params p{2};
  ASSERT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2,
                                    callback(CUPTI_API_ENTER, &p, nullptr), nullptr, 0, &e));
  EXPECT_EQ(e.op, f::Op::Reset);
  EXPECT_EQ(e.device, 2);
  int dummy = 0;
  EXPECT_FALSE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, callback(CUPTI_API_EXIT, &dummy, nullptr),
                                     nullptr, 0, &e));
  EXPECT_FALSE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, callback(CUPTI_API_EXIT, nullptr, nullptr),
                                     nullptr, 0, &e));
}

TEST(CuptiCallbacks, EnabledIdsMatchTheNotes) {
  CUpti_CallbackId ids[64];
  const int n = gmt::cupti::driver_callback_ids(ids, 64);
  EXPECT_EQ(n, 22);
  std::vector<CUpti_CallbackId> v(ids, ids + n);
  // Ids from ../shared/notes/cuda-capture.md.
  for (CUpti_CallbackId id : {243u, 244u, 245u, 294u, 39u, 38u, 371u, 598u, 599u, 600u, 601u, 611u, 612u, 602u, 547u,
                              548u, 549u, 550u, 551u, 552u})
    EXPECT_NE(std::find(v.begin(), v.end(), id), v.end()) << id;
}

// ---- activity buffers ----
// A buffer of packed records and a GetNextRecord double that walks it like CUPTI does.
struct FakeBuffer {
  std::vector<uint8_t> bytes;
  std::vector<size_t> offsets;
  size_t next = 0;
  template <typename R>
  void add(const R& r) {
    offsets.push_back(bytes.size());
    bytes.resize(bytes.size() + sizeof(R));
    memcpy(bytes.data() + offsets.back(), &r, sizeof(R));
  }
};
FakeBuffer* g_buffer = nullptr;
CUptiResult fake_next(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (g_buffer->next >= g_buffer->offsets.size() || g_buffer->offsets[g_buffer->next] >= valid)
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + g_buffer->offsets[g_buffer->next++]);
  return CUPTI_SUCCESS;
}

CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType op, uint64_t addr, uint64_t bytes) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = op;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = addr;
  m.bytes = bytes;
  m.timestamp = 123456789;
  return m;
}

TEST(CuptiActivity, CountsMemoryAndPoolRecords) {
  FakeBuffer buf;
  buf.add(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000, 4096));
  buf.add(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x3000, 8192));
  buf.add(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x1000, 4096));
  CUpti_ActivityMemoryPool3 pool{};
  pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
  pool.minBytesToKeep = 0;
  buf.add(pool);
  pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
  buf.add(pool);
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  buf.add(api);
  g_buffer = &buf;
  gmt::cupti::ActivityCounts counts;
  EXPECT_EQ(gmt::cupti::count_buffer(buf.bytes.data(), buf.bytes.size(), fake_next, &counts), 6u);
  EXPECT_EQ(counts.allocations, 2u);
  EXPECT_EQ(counts.allocated_bytes, 12288u);
  EXPECT_EQ(counts.releases, 1u);
  EXPECT_EQ(counts.released_bytes, 4096u);
  EXPECT_EQ(counts.pool_trims, 1u);
  EXPECT_EQ(counts.pools_created, 1u);
  EXPECT_EQ(counts.other, 1u);
}

TEST(CuptiActivity, EmptyOrMissingBufferIsHarmless) {
  gmt::cupti::ActivityCounts counts;
  EXPECT_EQ(gmt::cupti::count_buffer(nullptr, 0, fake_next, &counts), 0u);
  FakeBuffer empty;
  g_buffer = &empty;
  uint8_t byte = 0;
  EXPECT_EQ(gmt::cupti::count_buffer(&byte, 0, fake_next, &counts), 0u);
  EXPECT_EQ(gmt::cupti::count_buffer(&byte, 1, nullptr, &counts), 0u);
  gmt::cupti::count_activity(nullptr, &counts);
  EXPECT_EQ(counts.allocations + counts.other, 0u);
}

}  // namespace
