// cupti/cupti_events.h — turning CUPTI callbacks and activity records into gpumemtrace events.
//
// Pure functions over CUPTI's data structures (no libcupti, no recorder), so that they are unit-tested
// with hand-built CUpti_CallbackData / CUpti_ActivityMemory4 buffers (tests/unit/cupti_events_test.cpp).
//
// What counts (docs/capture.md): events come from DRIVER-domain callbacks only: a runtime call fires
// the driver callbacks of the driver calls it makes, so counting both would count twice. Runtime-domain
// callbacks only name the runtime API in progress on the thread (attribution: api = cudaMalloc,
// driver_api = cuMemAlloc_v2). Frees are taken at API_ENTER (before the memory can be reused),
// allocations at API_EXIT with the result. Activity records (MEMORY2, MEMORY_POOL) are an audit: they
// are counted, not recorded, so that nothing is counted twice; the backend compares the counts with the
// callbacks' at exit.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "interpose/recorder/recorder.h"

namespace gpumemtrace::cupti {

// Static name of a runtime API we attribute to (cudaMalloc, ...), null for the others.
const char* runtime_api_name(CUpti_CallbackId cbid) noexcept;

// Static name of a driver memory API we record (cuMemAlloc_v2, ...), null for the others.
const char* driver_api_name(CUpti_CallbackId cbid) noexcept;

// The driver callback ids to enable: every function of interpose/hooks/driver_hooks.def but the
// resolvers (every id driver_api_name knows). Returns how many were written (at most `capacity`).
int driver_callback_ids(CUpti_CallbackId* out, int capacity) noexcept;

// The runtime callback ids to enable: only those runtime_api_name knows (attribution), not the whole
// domain (a callback on every launch and copy).
int runtime_callback_ids(CUpti_CallbackId* out, int capacity) noexcept;

// The event of a driver-domain callback (the call's description, driver_calls.h, from CUPTI's
// parameter struct), or false when this (id, site) records nothing: an allocation at ENTER, a free at
// EXIT, a free of null, an id we do not follow. `runtime_api`: the runtime call in progress on this
// thread, or null. The device is left to record_call() unless the call names it (cuMemCreate's
// location, cuDevicePrimaryCtxReset's device; cuCtxDestroy: its context's).
bool driver_callback_event(CUpti_CallbackId cbid, const CUpti_CallbackData& cb, const char* runtime_api,
                           EventFacts* out) noexcept;

// Activity audit counters.
struct ActivityCounts {
  uint64_t allocations = 0;       // MEMORY2 ALLOCATION records
  uint64_t releases = 0;          // MEMORY2 RELEASE records
  uint64_t allocated_bytes = 0;
  uint64_t released_bytes = 0;
  uint64_t pool_trims = 0;        // MEMORY_POOL TRIMMED records
  uint64_t pools_created = 0;
  uint64_t other = 0;             // records of other kinds
};

void count_activity(const CUpti_Activity* record, ActivityCounts* counts) noexcept;

// Walks a completed activity buffer with `next` (cuptiActivityGetNextRecord, or a test double).
using NextRecordFn = CUptiResult (*)(uint8_t* buffer, size_t valid_size, CUpti_Activity** record);
size_t count_buffer(uint8_t* buffer, size_t valid_size, NextRecordFn next, ActivityCounts* counts) noexcept;

}  // namespace gpumemtrace::cupti
