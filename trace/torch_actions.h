// trace/torch_actions.h — PyTorch's caching-allocator actions (the "action" of an allocation-history
// entry, torch.cuda.memory._snapshot()) and what each becomes in a trace: the one table shared by the
// live bridge (interpose/hooks/torch_bridge.cpp) and the snapshot importer
// (report/import/snapshot_to_trace.cpp). docs/pytorch.md and docs/trace-format.md describe the mapping.
//
// Each row: the action's id here, PyTorch's name for it, the event op and memory kind it becomes
// (std::nullopt: no event), and where it becomes that event. The api of the event is "torch." + the
// name. The two users differ in one place only: a block's bytes stop counting at free_requested in the
// live trace (when PyTorch's allocated_bytes drops, so the trace agrees with its live counters) but at
// free_completed in an imported snapshot (when the block is reusable; the importer falls back to
// free_requested for histories recorded without free_completed). The importer also writes more than
// the row's op for some actions (segment_map: a physical alloc then the map; oom: a meminfo too).
//
// Thread-safety: constants only.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "trace/format.h"

namespace gpumemtrace::torch_actions {

using format::Kind;
using format::Op;

// The api of every event PyTorch reported (an action's row, the backward scope): this prefix + a name.
inline constexpr std::string_view kApiPrefix = "torch.";

// True for an event PyTorch reported (the live bridge, a snapshot import): api "torch." + a name.
inline bool is_torch_api(std::string_view api) {
  return api.size() > kApiPrefix.size() && api.compare(0, kApiPrefix.size(), kApiPrefix) == 0;
}

// Where an action's row applies (bits).
inline constexpr uint8_t kLive = 1;    // the live bridge records it
inline constexpr uint8_t kImport = 2;  // the snapshot importer converts it

// X(id, name, op, kind, where). Known actions without an event are still listed: the importer warns
// about unknown actions only. Actions of releases newer than this table are unknown to both users
// and ignored.
#define GPUMEMTRACE_TORCH_ACTIONS(X)                                                                   \
  X(Alloc, "alloc", Op::BlockAlloc, Kind::Block, kLive | kImport)                                      \
  X(FreeRequested, "free_requested", Op::BlockFree, Kind::Block, kLive | kImport)                      \
  X(FreeCompleted, "free_completed", Op::BlockFree, Kind::Block, kImport)                              \
  X(SegmentAlloc, "segment_alloc", Op::Alloc, Kind::Device, kLive | kImport)                           \
  X(SegmentFree, "segment_free", Op::Free, Kind::Device, kLive | kImport)                              \
  X(SegmentMap, "segment_map", Op::Map, Kind::Physical, kLive | kImport)   /* expandable segments */  \
  X(SegmentUnmap, "segment_unmap", Op::Unmap, Kind::Physical, kLive | kImport)                         \
  X(Oom, "oom", Op::BlockOom, Kind::Block, kLive | kImport)  /* addr = device free bytes */           \
  X(Snapshot, "snapshot", std::nullopt, Kind::None, 0)       /* _snapshot() was called */             \
  X(Annotate, "annotate", std::nullopt, Kind::None, 0)       /* metadata attached to a live block */

enum class Action : uint8_t {
#define GPUMEMTRACE_TORCH_ACTION_ENUM(id, name, op, kind, where) id,
  GPUMEMTRACE_TORCH_ACTIONS(GPUMEMTRACE_TORCH_ACTION_ENUM)
#undef GPUMEMTRACE_TORCH_ACTION_ENUM
  Unknown  // a name this table does not list
};

struct ActionInfo {
  Action action;
  const char* name;          // PyTorch's spelling
  const char* api;           // the events' "api": "torch." + name (static storage)
  std::optional<Op> op;      // the event it becomes; nullopt: none
  Kind kind;
  uint8_t where;             // kLive / kImport bits
};

inline constexpr ActionInfo kActions[] = {
#define GPUMEMTRACE_TORCH_ACTION_ROW(id, name, op, kind, where) {Action::id, name, "torch." name, op, kind, where},
    GPUMEMTRACE_TORCH_ACTIONS(GPUMEMTRACE_TORCH_ACTION_ROW)
#undef GPUMEMTRACE_TORCH_ACTION_ROW
};
inline constexpr size_t kActionCount = sizeof(kActions) / sizeof(kActions[0]);

// The row of `action`; nullptr for Action::Unknown.
inline constexpr const ActionInfo* info(Action action) {
  return static_cast<size_t>(action) < kActionCount ? &kActions[static_cast<size_t>(action)] : nullptr;
}

inline constexpr Action parse(std::string_view name) {
  for (const ActionInfo& a : kActions)
    if (name == a.name) return a.action;
  return Action::Unknown;
}

// The api of an action's events ("torch.alloc"); "torch.unknown" for Action::Unknown.
inline constexpr const char* api(Action action) {
  const ActionInfo* a = info(action);
  return a ? a->api : "torch.unknown";
}

}  // namespace gpumemtrace::torch_actions
