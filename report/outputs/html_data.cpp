// report/outputs/html_data.cpp — the data only the HTML report carries (see html_data.h).
#include "report/outputs/html_data.h"

#include <algorithm>
#include <unordered_map>

#include "report/outputs/json_output.h"
#include "report/outputs/stack_view.h"

namespace gpumemtrace::report {
using nlohmann::json;

namespace {

bool is_frame_list(const json& value) {
  return value.is_array() && std::all_of(value.begin(), value.end(), [](const json& f) {
           return f.is_object() && f.contains("function");
         });
}

// 'p' Python, 'u' the program's own code, 'l' a library's (folded in the view), 'i' the profiler's
// and CUDA's own frames (never shown in the view).
char frame_kind(const LogicalFrame& frame, const FrameClass& what) {
  if (what.role == FrameRole::Hidden) return 'i';
  if (what.role == FrameRole::Library) return 'l';
  return frame.python ? 'p' : 'u';
}

// Frames and stacks of one process, each frame once.
class StackTable {
 public:
  explicit StackTable(const StackViewOptions& options) : options_(options) {}

  json stack(const Stack& stack) {
    json frames = json::array();
    for (const LogicalFrame& f : stack) frames.push_back(frame_index(f));
    // The view's and the flame path's lines: a frame (its index in the table) or a text.
    auto lines = [&](const std::vector<StackViewLine>& shown) {
      json out = json::array();
      for (const StackViewLine& line : shown) {
        out.push_back(line.frame == StackViewLine::kText ? json(line.text) : frames[line.frame]);
      }
      return out;
    };
    return {{"f", frames}, {"v", lines(stack_view(stack, options_))}, {"g", lines(flame_view(stack, options_))}};
  }
  json frames() { return std::move(frames_); }

 private:
  size_t frame_index(const LogicalFrame& f) {
    std::string key = f.function + '\0' + f.file + '\0' + std::to_string(f.line) + '\0' + f.module + (f.python ? "p" : "") +
                      (f.inlined ? "i" : "");
    auto found = index_.find(key);
    if (found != index_.end()) return found->second;
    const FrameClass what = classify_frame(f, options_);
    frames_.push_back(json::array({frame_name(f, false), frame_location(f), std::string(1, frame_kind(f, what)),
                                   what.group}));
    index_.emplace(std::move(key), frames_.size() - 1);
    return frames_.size() - 1;
  }

  const StackViewOptions& options_;
  json frames_ = json::array();
  std::unordered_map<std::string, size_t> index_;
};

json moment_json(const TimelineMoment& m, uint64_t t0) {
  return {{"time", m.time_ns >= t0 ? m.time_ns - t0 : 0}, {"bytes", m.bytes}, {"count", m.count},
          {"shown_bytes", m.shown_bytes}, {"shown_count", m.shown_count}};
}

// The bands as columns (one array per field), starts as differences from the previous band's:
// about half the characters of one object per band.
json bands_json(const std::vector<TimelineBand>& bands, uint64_t t0) {
  uint64_t base = UINT64_MAX;
  for (const TimelineBand& b : bands) {
    if (b.addr) base = std::min(base, b.addr);
  }
  if (base == UINT64_MAX) base = 0;
  json start = json::array(), duration = json::array(), size = json::array(), addr = json::array(),
       stack = json::array(), role = json::array(), flags = json::array();
  uint64_t previous = t0;
  for (const TimelineBand& b : bands) {
    const uint64_t begin = std::max(b.start_ns, t0);
    start.push_back(begin - previous);
    previous = begin;
    duration.push_back(b.end_ns - std::min(b.end_ns, begin));
    size.push_back(b.size);
    addr.push_back(b.addr ? json(b.addr - base) : json(-1));
    stack.push_back(b.stack);
    role.push_back(static_cast<int>(b.role));
    flags.push_back(b.why | (b.live_at_end ? 16 : 0) | (b.segment ? 32 : 0) | (b.level == Level::Physical ? 64 : 0));
  }
  return {{"n", bands.size()}, {"base", base}, {"start", start}, {"duration", duration}, {"size", size},
          {"addr", addr}, {"stack", stack}, {"role", role}, {"flags", flags}};
}

json level_json(const TimelineLevel& level, uint64_t t0) {
  if (level.empty()) return nullptr;
  json ooms = json::array(), groups = json::array();
  for (const TimelineMoment& m : level.ooms) ooms.push_back(moment_json(m, t0));
  for (const TimelineGroup& g : level.groups) {
    groups.push_back({{"stack", g.stack == TimelineGroup::kOtherStacks ? json(-1) : json(g.stack)},
                      {"role", static_cast<int>(g.role)}, {"bytes", g.bytes}, {"count", g.count},
                      {"average", g.average}});
  }
  json sites = json::array();
  for (const TimelineSite& s : level.sites) {
    sites.push_back(json::array({s.stack, s.bytes, s.count, s.temporary_bytes, s.temporary_count}));
  }
  const TimelineSite& o = level.other_sites;
  if (o.count) sites.push_back(json::array({0, o.bytes, o.count, o.temporary_bytes, o.temporary_count}));
  return {{"allocations", level.allocations}, {"shown", level.shown}, {"aggregated", level.aggregated},
          {"sites", sites},
          {"aggregated_bytes", level.aggregated_bytes}, {"peak", moment_json(level.peak, t0)},
          {"ooms", ooms}, {"origin", level.origin_ns >= t0 ? level.origin_ns - t0 : 0},
          {"bucket_ns", level.bucket_ns}, {"live_max", level.live_max}, {"groups", groups},
          {"bands", bands_json(level.bands, t0)}};
}

}  // namespace

namespace {

class StackInterner {
 public:
  explicit StackInterner(const StackViewOptions& options) : options_(options) {}

  void walk(json& value) {
    if (value.is_array()) {
      for (json& item : value) walk(item);
      return;
    }
    if (!value.is_object()) return;
    for (auto& [key, item] : value.items()) {
      if (key != "stack") walk(item);
    }
    auto stack = value.find("stack");
    if (stack != value.end() && is_frame_list(*stack)) *stack = index_of(*stack);
  }
  json table() { return std::move(table_); }

 private:
  size_t index_of(const json& frames) {
    std::string key = frames.dump(-1, ' ', false, json::error_handler_t::replace);
    auto found = index_.find(key);
    if (found != index_.end()) return found->second;
    const Stack stack = stack_from_json(frames);
    // Lines are indices into the stack's frames, or texts (fold lines, "... N more frames").
    auto lines = [&](const std::vector<StackViewLine>& shown) {
      json out = json::array();
      for (const StackViewLine& line : shown) out.push_back(line.frame == StackViewLine::kText ? json(line.text) : json(line.frame));
      return out;
    };
    // Each frame as the text report names it: [function (C++ names shortened), location].
    json text = json::array();
    for (const LogicalFrame& f : stack) text.push_back(json::array({frame_name(f, false), frame_location(f)}));
    table_.push_back({{"frames", frames}, {"text", std::move(text)}, {"view", lines(stack_view(stack, options_))},
                      {"flame", lines(flame_view(stack, options_))}});
    index_.emplace(std::move(key), table_.size() - 1);
    return table_.size() - 1;
  }

  const StackViewOptions& options_;
  json table_ = json::array();
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace

void compact_for_page(json& document, const StackViewOptions& options) {
  StackInterner interner(options);
  interner.walk(document);
  document["stack_table"] = interner.table();
  // The device timelines (processes[].devices[].timeline) are drawn; fragmentation's copy is not.
  if (document.contains("fragmentation")) {
    for (json& f : document["fragmentation"]) f.erase("timeline");
  }
}

json allocation_timeline_json(const ProcessReport& r) {
  const AllocationTimeline& timeline = r.allocation_timeline;
  const uint64_t t0 = r.first_time_ns;
  StackViewOptions options;
  StackTable table(options);
  json stacks = json::array();
  for (const Stack& stack : timeline.stacks) stacks.push_back(table.stack(stack));
  json roles = json::array();
  for (size_t i = 0; i < kRoles; ++i) roles.push_back(role_name(static_cast<Role>(i)));
  json devices = json::array();
  for (const DeviceTimeline& d : timeline.devices) {
    json clock_time = json::array(), clock_event = json::array();
    for (const EventClock::Knot& k : d.clock.knots) {
      clock_time.push_back(k.time_ns >= t0 ? k.time_ns - t0 : 0);
      clock_event.push_back(k.event);
    }
    devices.push_back({{"device", d.device}, {"blocks", level_json(d.blocks, t0)}, {"memory", level_json(d.memory, t0)},
                       {"clock", {{"events", d.clock.events}, {"time", clock_time}, {"event", clock_event}}}});
  }
  json nvtx = json::array();
  for (const NvtxRange& n : r.nvtx_ranges) {
    nvtx.push_back(json::array({n.name, n.tid, n.begin_time_ns >= t0 ? n.begin_time_ns - t0 : 0,
                                n.end_time_ns >= t0 ? n.end_time_ns - t0 : 0, n.closed}));
  }
  return {{"pid", r.header.pid}, {"file", r.file}, {"t0_ns", t0}, {"end", r.last_time_ns - std::min(r.last_time_ns, t0)},
          {"roles", roles}, {"frames", table.frames()}, {"stacks", stacks},
          {"stacks_dropped", timeline.stacks_dropped}, {"nvtx", nvtx}, {"nvtx_total", r.nvtx_ranges_total},
          {"limits", {{"ordinary", timeline.max_ordinary}, {"pinned", timeline.max_pinned}}}, {"devices", devices}};
}

}  // namespace gpumemtrace::report
