// tests/unit/cupti_events_test.cpp — CUPTI callback and activity-record handling (cupti/cupti_events.h)
// with hand-built CUpti_CallbackData, parameter structs and CUpti_ActivityMemory4 / MemoryPool3
// buffers: CUPTI itself cannot run without a GPU.
#include "cupti/cupti_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace gmt = gpumemtrace;
namespace f = gpumemtrace::format;
using gmt::cupti::driver_callback_event;

namespace {

CUpti_CallbackData callback(CUpti_ApiCallbackSite site, void* params, CUresult* ret) {
  CUpti_CallbackData cb{};
  cb.callbackSite = site;
  cb.functionParams = params;
  cb.functionReturnValue = ret;
  return cb;
}

// The driver's device lookups (driver::kDriverQueries: device of a context / of the current one),
// faked: they answer g_device and count how often, and for which context, they were asked.
int32_t g_device = 0;
int g_lookups = 0;
CUcontext g_asked = nullptr;
int32_t fake_device_of(const void* ctx) {
  ++g_lookups;
  g_asked = static_cast<CUcontext>(const_cast<void*>(ctx));
  return g_device;
}
int32_t fake_current_device(int32_t) { return fake_device_of(nullptr); }
const gmt::DeviceQueries kFakeQueries = {"cuMemGetInfo_v2", fake_current_device, fake_device_of, nullptr, nullptr};

// The event of a callback with its device resolved as record_call() resolves it.
bool driver_callback_facts(CUpti_CallbackId id, const CUpti_CallbackData& cb, const char* runtime_api,
                           const gmt::DeviceQueries& queries, gmt::EventFacts* e) {
  if (!driver_callback_event(id, cb, runtime_api, e)) return false;
  gmt::resolve_device(e, queries);
  return true;
}

// The facts of callback `id` at `site` with `params` (and `result` at EXIT), the current context being
// on `device`; nullopt when the callback records nothing.
std::optional<gmt::EventFacts> at(CUpti_ApiCallbackSite site, CUpti_CallbackId id, void* params, CUresult* result,
                                  int32_t device = 0, const char* runtime_api = nullptr) {
  g_device = device;
  gmt::EventFacts e;
  if (!driver_callback_facts(id, callback(site, params, result), runtime_api, kFakeQueries, &e))
    return std::nullopt;
  return e;
}

CUresult ok = CUDA_SUCCESS;

TEST(CuptiCallbacks, AllocationAtExitWithAddressSizeAndResult) {
  CUdeviceptr ptr = 0x7f0000200000;
  cuMemAlloc_v2_params p{&ptr, 3145735};
  EXPECT_FALSE(at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, nullptr));
  auto e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, &ok);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Alloc);
  EXPECT_EQ(e->kind, f::Kind::Device);
  EXPECT_STREQ(e->api, "cuMemAlloc_v2");
  EXPECT_EQ(e->driver_api, nullptr);
  EXPECT_EQ(e->addr, 0x7f0000200000u);
  EXPECT_EQ(e->size, 3145735u);
  EXPECT_EQ(e->result, 0);
  EXPECT_TRUE(e->has_result);
  EXPECT_EQ(e->device, 0);
}

TEST(CuptiCallbacks, RuntimeAttributionGivesBothNames) {
  CUdeviceptr ptr = 0x1000;
  cuMemAlloc_v2_params p{&ptr, 4096};
  const char* runtime = gmt::cupti::runtime_api_name(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
  ASSERT_STREQ(runtime, "cudaMalloc");
  auto e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, &ok, 1, runtime);
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->api, "cudaMalloc");
  EXPECT_STREQ(e->driver_api, "cuMemAlloc_v2");
  EXPECT_EQ(e->device, 1);
  EXPECT_EQ(gmt::cupti::runtime_api_name(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), nullptr);
}

TEST(CuptiCallbacks, FailedAllocationKeepsRequestedSizeAndNoAddress) {
  CUdeviceptr ptr = 0xdeadbeef;  // garbage the driver left: must not be reported
  cuMemAlloc_v2_params p{&ptr, 64ull << 30};
  CUresult oom = CUDA_ERROR_OUT_OF_MEMORY;
  auto e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, &oom);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->result, 2);
  EXPECT_EQ(e->addr, 0u);
  EXPECT_EQ(e->size, 64ull << 30);
}

TEST(CuptiCallbacks, FreeAtEnterWithoutResult) {
  cuMemFree_v2_params p{0x7f0000200000};
  EXPECT_FALSE(at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &p, &ok));
  auto e = at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &p, nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Free);
  EXPECT_EQ(e->addr, 0x7f0000200000u);
  EXPECT_FALSE(e->has_result);
  cuMemFree_v2_params null_free{0};
  EXPECT_FALSE(at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &null_free, nullptr));
}

TEST(CuptiCallbacks, AsyncFromPoolCarriesStreamAndPool) {
  CUdeviceptr ptr = 0x2000;
  cuMemAllocFromPoolAsync_ptsz_params p{&ptr, 2097157, reinterpret_cast<CUmemoryPool>(0x9900),
                                        reinterpret_cast<CUstream>(0x5000)};
  auto e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, &p, &ok);
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->api, "cuMemAllocFromPoolAsync_ptsz");
  EXPECT_EQ(e->kind, f::Kind::Async);
  EXPECT_TRUE(e->has_stream && e->has_pool);
  EXPECT_EQ(e->stream, 0x5000u);
  EXPECT_EQ(e->pool, 0x9900u);

  cuMemPoolTrimTo_params t{reinterpret_cast<CUmemoryPool>(0x9900), 1 << 20};
  e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, &t, &ok);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Trim);
  EXPECT_EQ(e->size, 1u << 20);
  EXPECT_EQ(e->pool, 0x9900u);
}

TEST(CuptiCallbacks, VirtualMemoryPattern) {
  CUdeviceptr va = 0x7e0000000000;
  cuMemAddressReserve_params r{&va, 32 << 20, 0, 0, 0};
  auto e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &r, &ok);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Reserve);
  EXPECT_EQ(e->kind, f::Kind::Virtual);
  EXPECT_EQ(e->addr, va);

  CUmemGenericAllocationHandle h = 0x1010;
  CUmemAllocationProp prop{};
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 3;
  cuMemCreate_params c{&h, 4 << 20, &prop, 0};
  e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &c, &ok, -1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Alloc);
  EXPECT_EQ(e->kind, f::Kind::Physical);
  EXPECT_EQ(e->addr, 0x1010u);
  EXPECT_TRUE(e->has_handle);
  EXPECT_EQ(e->device, 3);  // from the allocation's properties, not the current context

  cuMemMap_params m{va, 4 << 20, 0, h, 0};
  e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemMap, &m, &ok);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Map);
  EXPECT_EQ(e->handle, 0x1010u);
  cuMemUnmap_params u{va, 4 << 20};
  e = at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &u, nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Unmap);
  EXPECT_EQ(e->addr, va);
  EXPECT_EQ(e->size, 4u << 20);
  cuMemRelease_params rel{h};
  e = at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &rel, nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Free);
  EXPECT_EQ(e->kind, f::Kind::Physical);
  EXPECT_EQ(e->addr, 0x1010u);
  cuMemAddressFree_params af{va, 32 << 20};
  e = at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &af, nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Unreserve);
  EXPECT_EQ(e->size, 32u << 20);
}

TEST(CuptiCallbacks, ResetAndUnknownIds) {
  cuDevicePrimaryCtxReset_v2_params p{2};
  auto e = at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2, &p, nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::Reset);
  EXPECT_EQ(e->device, 2);
  int dummy = 0;
  EXPECT_FALSE(at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dummy, nullptr));
  EXPECT_FALSE(at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, nullptr, nullptr));
}

TEST(CuptiCallbacks, ContextDestroyIsAResetOfTheContextsDevice) {
  auto* ctx = reinterpret_cast<CUcontext>(0xc0c0);
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy}) {
    cuCtxDestroy_v2_params p{ctx};
    g_asked = nullptr;
    auto e = at(CUPTI_API_ENTER, id, &p, nullptr, 5);
    ASSERT_TRUE(e) << id;
    EXPECT_EQ(e->op, f::Op::Reset);
    EXPECT_FALSE(e->has_result);
    EXPECT_EQ(e->device, 5);
    EXPECT_EQ(g_asked, ctx);  // the destroyed context's device, not the current context's
    EXPECT_FALSE(at(CUPTI_API_EXIT, id, &p, &ok));
  }
  cuDevicePrimaryCtxReset_params legacy{4};
  auto e = at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset, &legacy, nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->device, 4);
}

TEST(CuptiCallbacks, MemGetInfoIsAMeminfoEventWhenItSucceeds) {
  size_t free_bytes = 3 << 20, total_bytes = 16 << 20;
  cuMemGetInfo_v2_params p{&free_bytes, &total_bytes};
  EXPECT_FALSE(at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2, &p, nullptr));
  auto e = at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2, &p, &ok, 1, "cudaMemGetInfo");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->op, f::Op::MemInfo);
  EXPECT_EQ(e->kind, f::Kind::None);
  EXPECT_STREQ(e->api, "cudaMemGetInfo");
  EXPECT_TRUE(e->has_meminfo);
  EXPECT_FALSE(e->has_result);
  EXPECT_EQ(e->free_bytes, 3u << 20);
  EXPECT_EQ(e->total_bytes, 16u << 20);
  EXPECT_EQ(e->device, 1);
  CUresult invalid = CUDA_ERROR_INVALID_CONTEXT;
  EXPECT_FALSE(at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2, &p, &invalid));
}

TEST(CuptiCallbacks, DeviceIsAskedOnlyForEvents) {
  CUdeviceptr ptr = 0x3000;
  cuMemAlloc_v2_params p{&ptr, 512};
  g_lookups = 0;
  EXPECT_FALSE(at(CUPTI_API_ENTER, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, nullptr));
  EXPECT_EQ(g_lookups, 0);
  ASSERT_TRUE(at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, &ok));
  EXPECT_EQ(g_lookups, 1);
  EXPECT_EQ(g_asked, nullptr);  // the current context
  CUmemGenericAllocationHandle h = 0x20;
  CUmemAllocationProp prop{};
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  cuMemCreate_params c{&h, 2 << 20, &prop, 0};
  ASSERT_TRUE(at(CUPTI_API_EXIT, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &c, &ok));
  EXPECT_EQ(g_lookups, 1);  // named by the call
  gmt::EventFacts e;
  EXPECT_TRUE(driver_callback_facts(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, callback(CUPTI_API_EXIT, &p, &ok), nullptr,
                                    gmt::DeviceQueries{}, &e));
  EXPECT_EQ(e.device, -1);  // no lookup: unknown
}

TEST(CuptiCallbacks, EnabledIdsMatchTheNotes) {
  CUpti_CallbackId ids[64];
  const int n = gmt::cupti::driver_callback_ids(ids, 64);
  EXPECT_EQ(n, 25);  // driver_hooks.def without its two resolvers
  std::vector<CUpti_CallbackId> v(ids, ids + n);
  // Ids from ../shared/notes/cuda-capture.md, then cuMemGetInfo_v2, cuCtxDestroy[_v2] and
  // cuDevicePrimaryCtxReset[_v2] (cupti_driver_cbid.h).
  for (CUpti_CallbackId id : {243u, 244u, 245u, 294u, 39u, 38u, 371u, 598u, 599u, 600u, 601u, 611u, 612u, 602u, 547u,
                              548u, 549u, 550u, 551u, 552u, 242u, 11u, 322u, 389u, 545u})
    EXPECT_NE(std::find(v.begin(), v.end(), id), v.end()) << id;
  for (CUpti_CallbackId id : v) EXPECT_NE(gmt::cupti::driver_api_name(id), nullptr) << id;
  EXPECT_EQ(gmt::cupti::driver_api_name(CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress), nullptr);
  EXPECT_EQ(gmt::cupti::driver_api_name(CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2), nullptr);
  EXPECT_EQ(gmt::cupti::driver_callback_ids(ids, 3), 3);  // never more than asked for
}

TEST(CuptiCallbacks, RuntimeIdsAreOnlyTheAttributedOnes) {
  CUpti_CallbackId ids[64];
  const int n = gmt::cupti::runtime_callback_ids(ids, 64);
  EXPECT_EQ(n, 17);
  for (int i = 0; i < n; ++i) EXPECT_NE(gmt::cupti::runtime_api_name(ids[i]), nullptr) << ids[i];
  std::vector<CUpti_CallbackId> v(ids, ids + n);
  EXPECT_NE(std::find(v.begin(), v.end(), CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020), v.end());
  EXPECT_EQ(std::find(v.begin(), v.end(), CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), v.end());
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
