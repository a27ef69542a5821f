// report/reader/ids.h — the trace's module, frame and stack ids as distinct types, so that a frame id
// can never be looked up as a stack (or a stack id packed where a module belongs) without a cast
// that says so.
//
// The trace's ids are small positive integers (trace/format.h); 0 means "none" for stacks and
// modules and is never a frame's id. The reader checks every id against its definition and builds
// these at that boundary (trace_reader.cpp); nothing past the reader sees a bare integer id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpumemtrace::report {

template <typename Tag>
struct TraceId {
  uint32_t value = 0;  // 0 = none

  constexpr TraceId() = default;
  constexpr explicit TraceId(uint32_t id) : value(id) {}
  // Whether it names something (not the "none" id 0).
  constexpr explicit operator bool() const { return value != 0; }

  friend constexpr bool operator==(TraceId a, TraceId b) { return a.value == b.value; }
  friend constexpr bool operator!=(TraceId a, TraceId b) { return a.value != b.value; }
  friend constexpr bool operator<(TraceId a, TraceId b) { return a.value < b.value; }
};

using StackId = TraceId<struct StackIdTag>;
using FrameId = TraceId<struct FrameIdTag>;
using ModuleId = TraceId<struct ModuleIdTag>;

}  // namespace gpumemtrace::report

template <typename Tag>
struct std::hash<gpumemtrace::report::TraceId<Tag>> {
  size_t operator()(gpumemtrace::report::TraceId<Tag> id) const noexcept { return std::hash<uint32_t>{}(id.value); }
};
