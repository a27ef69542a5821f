// report/import/snapshot_to_trace.cpp — see snapshot_to_trace.h; the mapping is documented in
// docs/trace-format.md ("PyTorch snapshot import").
//
// Shape of the input (torch/csrc/cuda/memory_snapshot.cpp and torch/cuda/memory.py, PyTorch 2.x):
//   {"segments": [{"device", "address", "total_size", "stream", "segment_type", "segment_pool_id",
//                  "is_expandable", "frames"?, "blocks": [{"address"?, "size", "requested_size",
//                  "state", "frames"}]}],
//    "device_traces": [[{"action", "addr" | "device_free" (oom), "size", "stream", "time_us",
//                        "frames"?}] per device],
//    "allocator_settings": {...}}
// `segments` is the state when the snapshot was taken (the END of the history), while the history is
// a ring that may have lost its oldest entries. So the state at the FIRST history entry is rebuilt by
// replaying the history backwards from the final state, and emitted as initial events; then the
// history is emitted forwards. That way every block freed in the history has a matching allocation,
// and every block live at the end is live in the timeline.
#include "report/import/snapshot_to_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "report/import/pickle_reader.h"
#include "trace/alloc_conf.h"
#include "trace/format.h"
#include "trace/json_line.h"
#include "trace/torch_actions.h"
#include "util/ends_with.h"

namespace gpumemtrace::snapshot {

namespace {

using pickle::Document;
using pickle::Kind;
using pickle::kNoNode;
namespace fmt = gpumemtrace::format;
namespace ta = gpumemtrace::torch_actions;
using ta::Action;

constexpr size_t kMaxFramesPerStack = 512;
// Values format.h does not name (the reader's defaults; written for readers of the converted trace).
constexpr const char* kLangNative = "native";
constexpr const char* kFieldSource = "source";  // header: the snapshot file converted
constexpr size_t kMaxWarnings = 8;
// Function and file names longer than this are cut (a real one is far shorter): every distinct frame
// writes its names into the trace, so a hostile pickle that shares one huge string among many frames
// must not multiply it.
constexpr size_t kMaxNameBytes = 4096;

struct Entry {
  Action action = Action::Unknown;
  int device = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t device_free = 0;
  int64_t time_us = 0;
  uint32_t frames = kNoNode;
};

struct Block {
  uint64_t size = 0;
  uint32_t frames = kNoNode;
};

struct Segment {
  uint64_t size = 0;
  uint64_t stream = 0;
  uint32_t frames = kNoNode;
  std::string pool;
};

// Disjoint half-open ranges [start, end), merged when they touch.
class RangeSet {
 public:
  void add(uint64_t start, uint64_t end) {
    if (start >= end) return;
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= start) {
        start = prev->first;
        end = std::max(end, prev->second);
        it = ranges_.erase(prev);
      }
    }
    while (it != ranges_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_[start] = end;
  }
  void remove(uint64_t start, uint64_t end) {
    if (start >= end) return;
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin()) --it;
    while (it != ranges_.end() && it->first < end) {
      uint64_t s = it->first, e = it->second;
      if (e <= start) { ++it; continue; }
      it = ranges_.erase(it);
      if (s < start) ranges_[s] = start;
      if (e > end) { ranges_[end] = e; break; }
    }
  }
  // Start of the range that contains addr, or false.
  bool find(uint64_t addr, uint64_t* start) const {
    auto it = ranges_.upper_bound(addr);
    if (it == ranges_.begin()) return false;
    --it;
    if (addr >= it->second) return false;
    *start = it->first;
    return true;
  }
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;
};

struct DeviceState {
  std::map<uint64_t, Segment> regular;        // live regular segments by address
  RangeSet mapped;                            // mapped ranges of expandable segments
  std::map<uint64_t, uint64_t> expandable;    // expandable segments of the final state: base -> end
  std::map<uint64_t, Block> blocks;           // live blocks by address
  // Forward pass only: the physical chunks behind the mapped ranges, start -> (end, stack). Each one
  // is reported like cuMemCreate (an `alloc` of kind physical whose addr is the handle; the chunk's
  // start address serves as handle) so that reserved memory counts it. A mapped range is cut into
  // chunks at every address where the history maps or unmaps (cuts), so that an unmap releases whole
  // chunks: reserved bytes move by exactly what was unmapped, never through a dip or a bump.
  std::map<uint64_t, std::pair<uint64_t, uint32_t>> chunks;
  std::set<uint64_t> cuts;
};

// Frames of PyTorch's own stack capture, not the program's: dropped like the recorder drops its own.
bool is_capture_frame(std::string_view function) {
  return function.find("unwind::unwind") != std::string_view::npos ||
         function.find("CapturedTraceback::gather") != std::string_view::npos ||
         function.find("gather_with_cpp") != std::string_view::npos;
}

bool is_python_file(std::string_view file) {
  return util::ends_with(file, ".py") || (file.size() >= 2 && file.front() == '<' && file.back() == '>');
}

class Converter {
 public:
  // source_name: the snapshot's name, for the header and the errors.
  Converter(const Document& doc, const std::string& source_name, std::ostream& out, ConvertStats* stats)
      : doc_(doc), source_name_(source_name), out_(out), stats_(*stats),
        max_items_(kExpansionItemsBase + doc.data().size()),
        max_output_bytes_(kExpansionOutputBase + kExpansionOutputPerInputByte * doc.data().size()) {}

  // Writes the whole trace; throws SnapshotError.
  void run();

 private:
  [[noreturn]] void fail(const std::string& message) const { throw SnapshotError(source_name_, message); }
  void warn(const std::string& msg) {
    if (stats_.warnings.size() < kMaxWarnings) stats_.warnings.push_back(msg);
  }
  // A history entry the final state contradicts: counted, the first one named (inconsistency_line).
  void inconsistent(const char* what, const Entry& e) {
    if (contradictions_++ > 0) return;
    char buf[160];
    snprintf(buf, sizeof buf, "%s (device %d, addr 0x%" PRIx64 ", size %" PRIu64 ")", what, e.device, e.addr, e.size);
    first_contradiction_ = buf;
  }
  // The one line that names what is inconsistent, "" when nothing is.
  std::string inconsistency_line() const;
  // An integer field of a segment, block or history entry; `fallback` when it is absent. An address
  // or stream may be a negative int64 (PyTorch's C++ pickler writes them so); a size may not. Anything
  // else present (a float, NaN, a negative size, a string) is read as `fallback` too, and counted: one
  // warning says so (run()), instead of a silent 0.
  uint64_t u64(uint32_t dict, std::string_view key, uint64_t fallback = 0, bool is_size = false) {
    const uint32_t value = doc_.get(dict, key);
    if (value == kNoNode) return fallback;
    uint64_t v;
    if (doc_.as_u64(value, &v)) return v;
    int64_t s;
    if (!is_size && doc_.as_i64(value, &s)) return static_cast<uint64_t>(s);
    if (bad_numbers_++ == 0) first_bad_number_ = std::string(key) + " = " + describe_number(value);
    return fallback;
  }
  uint64_t size_of(uint32_t dict, std::string_view key, uint64_t fallback = 0) { return u64(dict, key, fallback, true); }
  // How a value that is not a size looks, for the warning.
  std::string describe_number(uint32_t value) const {
    const pickle::Node& node = doc_.node(value);
    if (node.kind == Kind::Float) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", node.real);
      return text;
    }
    int64_t s;
    if (doc_.as_i64(value, &s)) return std::to_string(s);
    return std::string("a ") + pickle::kind_name(node.kind);
  }
  void read_segments(uint32_t segments);
  void read_traces(uint32_t traces);
  void reverse_replay();
  void leave_out_blocks_outside_segments();
  void write_settings(uint32_t settings);
  uint32_t stack_of(uint32_t frames);
  uint32_t frame_id(std::string_view function, std::string_view file, int64_t line, bool python);
  // An event line in line_: begin_event writes the fields every event has, the caller adds its
  // own, end_event writes the line out.
  JsonLine begin_event(uint64_t t, const char* api, fmt::Op op, fmt::Kind kind, uint64_t addr, uint64_t size,
                       int device, uint32_t stack);
  // The same with the op, kind and api of the action's row of trace/torch_actions.h (an action
  // that has an event).
  JsonLine begin_action_event(uint64_t t, Action action, uint64_t addr, uint64_t size, int device, uint32_t stack) {
    const ta::ActionInfo& a = *ta::info(action);
    return begin_event(t, a.api, *a.op, a.kind, addr, size, device, stack);
  }
  void end_event(JsonLine& event) {
    event.end();
    write_line();
    ++stats_.events;
  }
  // Past the output limit nothing more is written: the conversion fails.
  void write_line() {
    output_bytes_ += line_.size();
    if (output_bytes_ > max_output_bytes_) fail(limit_error());
    out_.write(line_.data(), static_cast<std::streamsize>(line_.size()));
  }
  // Counts `n` list items about to be visited. The memo lets a pickle reference one list from many
  // places, so what the converter visits can be exponentially larger than the input; past the limit
  // the conversion fails.
  void visit(size_t n) {
    items_visited_ += n;
    if (items_visited_ > max_items_) fail(limit_error());
  }
  std::string limit_error() const;
  void emit_initial_state();
  void map_range(uint64_t t, int device, uint64_t start, uint64_t end, uint32_t stack);
  void map_chunk(uint64_t t, int device, uint64_t start, uint64_t end, uint32_t stack);
  void unmap_range(uint64_t t, int device, uint64_t start, uint64_t end, uint32_t stack);
  void emit_entry(const Entry& e);
  DeviceState& dev(int device) { return devices_[device]; }
  bool segment_of(int device, uint64_t addr, uint64_t* segment);
  // True when [addr, addr + size) lies in a live regular segment or a mapped range now.
  bool inside_live_segment(int device, uint64_t addr, uint64_t size);
  uint64_t t_of(int64_t time_us) const {
    return time_us > t0_us_ ? static_cast<uint64_t>(time_us - t0_us_) * 1000u : 0;
  }

  const Document& doc_;
  const std::string& source_name_;
  std::ostream& out_;
  ConvertStats& stats_;
  std::string line_;
  uint64_t seq_ = 0;
  int64_t t0_us_ = 0;
  uint64_t last_t_ = 0;
  std::map<int, DeviceState> devices_;       // the final state, then (after reverse_replay) the initial one
  std::map<int, std::vector<Entry>> traces_;  // per device, in history order
  bool use_free_completed_ = true;
  const uint64_t max_items_;
  const uint64_t max_output_bytes_;
  uint64_t items_visited_ = 0;
  uint64_t output_bytes_ = 0;
  uint64_t bad_numbers_ = 0;        // integer fields that held something else (u64)
  std::string first_bad_number_;
  bool initial_ = false;            // writing the state before the history (events marked "initial")
  // What is inconsistent (inconsistency_line): blocks outside every segment (left out, and their
  // frees with them), and history entries the final state contradicts.
  uint64_t blocks_outside_ = 0;
  uint64_t contradictions_ = 0;
  std::string first_contradiction_;
  std::map<int, std::set<uint64_t>> left_out_;  // per device: blocks of the history left out, by address
  std::unordered_map<std::string, uint32_t> frame_ids_;
  std::map<std::vector<uint32_t>, uint32_t> stack_ids_;
  std::unordered_map<uint32_t, uint32_t> stack_by_node_;
};

std::string Converter::limit_error() const {
  if (items_visited_ > max_items_) {
    return "snapshot refused: its shared references expand to more than " + std::to_string(max_items_) +
           " list items (the limit is 1 Mi + one per input byte; a snapshot written by PyTorch stays far below)";
  }
  return "snapshot refused: the converted trace would exceed " + std::to_string(max_output_bytes_) +
         " bytes (the limit is 256 MiB + 64 per input byte; a snapshot written by PyTorch stays far below)";
}

void Converter::read_segments(uint32_t segments) {
  visit(doc_.items(segments).size());
  for (uint32_t seg : doc_.items(segments)) {
    if (!doc_.is(seg, Kind::Dict))
      fail("not a PyTorch memory snapshot: a segment is a " + std::string(pickle::kind_name(doc_.node(seg).kind)) +
           ", not a dict");
    ++stats_.segments;
    int64_t device = 0;
    doc_.as_i64(doc_.get(seg, "device"), &device);
    if (device < -1 || device > 1 << 20) device = 0;
    DeviceState& d = dev(static_cast<int>(device));
    uint64_t base = u64(seg, "address");
    uint64_t total = size_of(seg, "total_size");
    uint32_t expandable = doc_.get(seg, "is_expandable");
    bool is_expandable = doc_.is(expandable, Kind::Bool) && doc_.node(expandable).boolean;
    if (is_expandable) {
      d.mapped.add(base, base + total);
      d.expandable[base] = base + total;
    } else {
      Segment s;
      s.size = total;
      s.stream = u64(seg, "stream");
      s.frames = doc_.get(seg, "frames");
      d.regular[base] = s;
    }
    // Blocks tile the segment in address order; older snapshots give no "address", so keep a cursor.
    uint64_t cursor = base;
    visit(doc_.items(doc_.get(seg, "blocks")).size());
    for (uint32_t blk : doc_.items(doc_.get(seg, "blocks"))) {
      if (!doc_.is(blk, Kind::Dict)) continue;
      uint64_t addr = u64(blk, "address", cursor);
      uint64_t size = size_of(blk, "size");
      cursor = addr + size;
      std::string_view state = doc_.str(doc_.get(blk, "state"));
      // active_awaiting_free (Python binding) / active_pending_free (C++ pickler): the program freed it,
      // but the block is not reusable until its streams are done: still live in our timeline.
      if (state != "active_allocated" && state != "active_awaiting_free" && state != "active_pending_free")
        continue;
      // A live block must lie in its segment; one that does not (a synthetic snapshot) is left out:
      // counted in the one inconsistency line, never counted as memory no segment holds.
      if (addr < base || size > total || addr - base > total - size) {
        ++blocks_outside_;
        continue;
      }
      Block b;
      b.size = size_of(blk, "requested_size", 0);
      if (b.size == 0) b.size = size;
      b.frames = doc_.get(blk, "frames");
      if (b.frames == kNoNode) {  // PyTorch < 2.1: "history": [{addr, real_size, frames}], newest last
        const auto& hist = doc_.items(doc_.get(blk, "history"));
        if (!hist.empty()) b.frames = doc_.get(hist.back(), "frames");
      }
      d.blocks[addr] = b;
    }
  }
}

void Converter::read_traces(uint32_t traces) {
  const auto& per_device = doc_.items(traces);
  bool any_completed = false, any_requested = false;
  for (size_t device = 0; device < per_device.size(); ++device) {
    auto& list = traces_[static_cast<int>(device)];
    visit(doc_.items(per_device[device]).size());
    for (uint32_t te : doc_.items(per_device[device])) {
      ++stats_.trace_entries;
      if (!doc_.is(te, Kind::Dict)) {
        ++stats_.ignored_entries;
        continue;
      }
      Entry e;
      e.device = static_cast<int>(device);
      e.action = ta::parse(doc_.str(doc_.get(te, "action")));
      e.addr = u64(te, "addr");
      e.size = size_of(te, "size");
      e.stream = u64(te, "stream");
      e.device_free = size_of(te, "device_free", e.addr);
      if (!doc_.as_i64(doc_.get(te, "time_us"), &e.time_us)) {
        double t;
        e.time_us = doc_.as_double(doc_.get(te, "time_us"), &t) && t > 0 && t < 9e15 ? static_cast<int64_t>(t) : 0;
      }
      e.frames = doc_.get(te, "frames");
      any_completed |= e.action == Action::FreeCompleted;
      any_requested |= e.action == Action::FreeRequested;
      if (e.action == Action::Unknown) {
        ++stats_.ignored_entries;
        warn("unknown history action '" + std::string(doc_.str(doc_.get(te, "action"))).substr(0, 64) + "' ignored");
        continue;
      }
      list.push_back(e);
      dev(e.device);  // make sure the device exists
    }
  }
  // free_completed is when the block becomes reusable; free_requested only when the program let go of
  // it (they differ when the block was used on another stream). Use free_completed, and fall back to
  // free_requested for histories recorded without it (skip_actions).
  use_free_completed_ = any_completed || !any_requested;
}

void Converter::reverse_replay() {
  const Action free_action = use_free_completed_ ? Action::FreeCompleted : Action::FreeRequested;
  for (auto& [device, list] : traces_) {
    DeviceState& d = dev(device);
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      const Entry& e = *it;
      switch (e.action) {
        case Action::Alloc:
          if (d.blocks.erase(e.addr) == 0) inconsistent("alloc of a block that is not live later", e);
          break;
        case Action::FreeRequested:
        case Action::FreeCompleted:
          if (e.action != free_action) break;
          if (!d.blocks.emplace(e.addr, Block{e.size, kNoNode}).second) inconsistent("free of a block live after it", e);
          break;
        case Action::SegmentAlloc:
          if (d.regular.erase(e.addr) == 0) inconsistent("segment_alloc of a segment that is not live later", e);
          break;
        case Action::SegmentFree: {
          Segment s;
          s.size = e.size;
          s.stream = e.stream;
          if (!d.regular.emplace(e.addr, s).second) inconsistent("segment_free of a segment live after it", e);
          break;
        }
        case Action::SegmentMap: d.mapped.remove(e.addr, e.addr + e.size); break;
        case Action::SegmentUnmap: d.mapped.add(e.addr, e.addr + e.size); break;
        default: break;
      }
    }
  }
}

// Blocks live at the start that no segment live at the start holds: left out, as read_segments
// leaves out a final block outside its segment.
void Converter::leave_out_blocks_outside_segments() {
  for (auto& [device, d] : devices_) {
    for (auto it = d.blocks.begin(); it != d.blocks.end();) {
      if (inside_live_segment(device, it->first, it->second.size)) {
        ++it;
        continue;
      }
      ++blocks_outside_;
      it = d.blocks.erase(it);
    }
  }
}

std::string Converter::inconsistency_line() const {
  if (!blocks_outside_ && !contradictions_) return "";
  std::string line = "inconsistent snapshot: ";
  if (blocks_outside_) {
    line += std::to_string(blocks_outside_) + (blocks_outside_ == 1 ? " block lies" : " blocks lie") +
            " outside every segment (left out)";
  }
  if (contradictions_) {
    line += std::string(blocks_outside_ ? "; " : "") + std::to_string(contradictions_) +
            (contradictions_ == 1 ? " history entry contradicts" : " history entries contradict") +
            " the final state (the first: " + first_contradiction_ + ")";
  }
  return line + "; no fragmentation, growth or what-if figures are given, as PyTorch's own segsum refuses such a snapshot";
}

// The snapshot's own allocator settings (PyTorch 2.3+: _snapshot()["allocator_settings"], the dict
// torch/csrc/cuda/Module.cpp builds) as one "allocator_settings" record of source in_force, before
// the first event: the settings text it last parsed (PYTORCH_CUDA_ALLOC_CONF, only the allocator's
// own keys: trace/alloc_conf.h), with the options the dict reports taking its values. The same rule as
// the live hook's (tools/python/gpumemtrace_torch/settings.py, in_force_text).
void Converter::write_settings(uint32_t settings) {
  if (!doc_.is(settings, Kind::Dict)) return;
  std::vector<std::pair<std::string, std::string>> reported;  // key -> item ("" = the default: left out)
  const uint32_t expandable = doc_.get(settings, "expandable_segments");
  if (doc_.is(expandable, Kind::Bool)) {
    reported.emplace_back("expandable_segments", doc_.node(expandable).boolean ? "expandable_segments:True" : "");
  }
  int64_t max_split = 0;
  if (doc_.as_i64(doc_.get(settings, "max_split_size"), &max_split)) {
    // size_t max, reported as an int64: -1 (unlimited).
    reported.emplace_back("max_split_size_mb", max_split > 0 && max_split < (int64_t{1} << 62)
                                                   ? "max_split_size_mb:" + std::to_string(max_split >> 20)
                                                   : "");
  }
  double gc = 0;
  const uint32_t gc_node = doc_.get(settings, "garbage_collection_threshold");
  if (gc_node != kNoNode && !doc_.is(gc_node, Kind::Bool) && doc_.as_double(gc_node, &gc)) {
    char text[64];
    std::snprintf(text, sizeof text, "garbage_collection_threshold:%.17g", gc);
    reported.emplace_back("garbage_collection_threshold", gc > 0 && gc < 1 ? text : "");
  }
  const uint32_t divisions = doc_.get(settings, "roundup_power2_divisions");
  if (doc_.is(divisions, Kind::Dict)) {
    std::map<int64_t, int64_t> pairs;  // interval start in MiB -> divisions
    const auto& items = doc_.items(divisions);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      int64_t mb = 0, n = 0;
      const std::string key(doc_.str(items[i]));
      if (!doc_.as_i64(items[i + 1], &n) || key.empty() || key.size() > 12 ||
          key.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      mb = std::stoll(key);
      pairs[mb] = n;
    }
    std::string item;
    for (const auto& [mb, n] : pairs) {
      if (n) item = "set";
    }
    if (!item.empty()) {
      item = "roundup_power2_divisions:[";
      bool first = true;
      for (const auto& [mb, n] : pairs) {
        item += (first ? "" : ",") + std::to_string(mb) + ":" + std::to_string(n);
        first = false;
      }
      item += "]";
    }
    if (!pairs.empty()) reported.emplace_back("roundup_power2_divisions", item);
  }
  // The text it parsed, less the options reported above.
  std::string parsed(doc_.str(doc_.get(settings, "PYTORCH_CUDA_ALLOC_CONF")).substr(0, 4096));
  std::vector<char> kept(parsed.size() + 1);
  alloc_conf::sanitize(parsed, kept.data(), kept.size());
  std::string conf;
  std::string_view rest(kept.data());
  while (!rest.empty()) {
    const size_t comma = [&] {  // the ',' that ends this item (not one inside [...])
      int depth = 0;
      for (size_t i = 0; i < rest.size(); ++i) {
        if (rest[i] == '[') ++depth;
        if (rest[i] == ']') --depth;
        if (rest[i] == ',' && depth <= 0) return i;
      }
      return rest.size();
    }();
    const std::string_view item = rest.substr(0, comma);
    const std::string_view key = item.substr(0, item.find(':'));
    bool replaced = false;
    for (const auto& r : reported) replaced = replaced || r.first == key;
    if (!replaced) conf += (conf.empty() ? "" : ",") + std::string(item);
    rest = comma < rest.size() ? rest.substr(comma + 1) : std::string_view();
  }
  for (const auto& r : reported) {
    if (!r.second.empty()) conf += (conf.empty() ? "" : ",") + r.second;
  }
  line_.clear();
  JsonLine(&line_)
      .begin(fmt::kTypeAllocatorSettings)
      .unum(fmt::kFieldSeq, ++seq_)
      .unum(fmt::kFieldTime, 0)
      .unum(fmt::kFieldTid, 0)
      .str(fmt::kFieldSource, fmt::kSettingsSourceInForce)
      .num(fmt::kFieldDevice, -1)
      .str(fmt::kFieldConf, conf)
      .end();
  write_line();
}

uint32_t Converter::frame_id(std::string_view function, std::string_view file, int64_t line, bool python) {
  std::string key;
  key.reserve(function.size() + file.size() + 24);
  key.append(python ? "p" : "n").append(function).push_back('\0');
  key.append(file).push_back('\0');
  key.append(std::to_string(line));
  auto [it, inserted] = frame_ids_.emplace(std::move(key), static_cast<uint32_t>(frame_ids_.size() + 1));
  if (inserted) {
    line_.clear();
    JsonLine frame(&line_);
    frame.begin(fmt::kTypeFrame)
        .unum(fmt::kFieldId, it->second)
        .str(fmt::kFieldLang, python ? fmt::kLangPython : kLangNative)
        .str(fmt::kFieldFunction, std::string(function));
    if (!file.empty() && file != "??") frame.str(fmt::kFieldFile, std::string(file));
    if (line > 0) frame.num(fmt::kFieldLine, line);
    frame.end();
    write_line();
  }
  return it->second;
}

// Stack id for a "frames" list (innermost first, as PyTorch records them); 0 when there is none.
uint32_t Converter::stack_of(uint32_t frames) {
  if (frames == kNoNode || doc_.items(frames).empty()) return 0;
  auto cached = stack_by_node_.find(frames);
  if (cached != stack_by_node_.end()) return cached->second;
  std::vector<uint32_t> ids;
  visit(doc_.items(frames).size());  // each list once (cached by node below)
  for (uint32_t f : doc_.items(frames)) {
    if (ids.size() >= kMaxFramesPerStack) break;
    if (!doc_.is(f, Kind::Dict)) continue;
    std::string_view function = doc_.str(doc_.get(f, "name")).substr(0, kMaxNameBytes);
    std::string_view file = doc_.str(doc_.get(f, "filename")).substr(0, kMaxNameBytes);
    int64_t line = 0;
    doc_.as_i64(doc_.get(f, "line"), &line);
    if (is_capture_frame(function)) continue;
    ids.push_back(frame_id(function, file, line, is_python_file(file)));
  }
  uint32_t id = 0;
  if (!ids.empty()) {
    auto [it, inserted] = stack_ids_.emplace(ids, static_cast<uint32_t>(stack_ids_.size() + 1));
    id = it->second;
    if (inserted) {
      std::string list = "[";
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) list += ',';
        JsonLine::append_uint(&list, ids[i]);
      }
      list += ']';
      line_.clear();
      JsonLine stack(&line_);
      stack.begin(fmt::kTypeStack).unum(fmt::kFieldId, id).raw(fmt::kFieldFrames, list).end();
      write_line();
    }
  }
  stack_by_node_[frames] = id;
  return id;
}

JsonLine Converter::begin_event(uint64_t t, const char* api, fmt::Op op, fmt::Kind kind, uint64_t addr, uint64_t size,
                                int device, uint32_t stack) {
  last_t_ = std::max(last_t_, t);
  line_.clear();
  JsonLine event(&line_);
  event.begin(fmt::kTypeEvent)
      .unum(fmt::kFieldSeq, ++seq_)
      .unum(fmt::kFieldTime, t)
      .unum(fmt::kFieldTid, 0)
      .str(fmt::kFieldApi, api)
      .str(fmt::kFieldOp, fmt::op_name(op))
      .str(fmt::kFieldKind, fmt::kind_name(kind))
      .hex(fmt::kFieldAddr, addr)
      .unum(fmt::kFieldSize, size)
      .num(fmt::kFieldDevice, device)
      .unum(fmt::kFieldStack, stack);
  if (initial_) event.flag(fmt::kFieldInitial);
  return event;
}

bool Converter::inside_live_segment(int device, uint64_t addr, uint64_t size) {
  DeviceState& d = dev(device);
  const uint64_t end = size > UINT64_MAX - addr ? UINT64_MAX : addr + size;
  auto it = d.regular.upper_bound(addr);
  if (it != d.regular.begin()) {
    --it;
    if (end <= it->first + it->second.size) return true;
  }
  uint64_t start;
  if (!d.mapped.find(addr, &start)) return false;
  auto range = d.mapped.ranges().find(start);
  return range != d.mapped.ranges().end() && end <= range->second;
}

bool Converter::segment_of(int device, uint64_t addr, uint64_t* segment) {
  DeviceState& d = dev(device);
  auto it = d.regular.upper_bound(addr);
  if (it != d.regular.begin()) {
    --it;
    if (addr < it->first + it->second.size) {
      *segment = it->first;
      return true;
    }
  }
  auto ex = d.expandable.upper_bound(addr);
  if (ex != d.expandable.begin()) {
    --ex;
    if (addr < ex->second) {
      *segment = ex->first;
      return true;
    }
  }
  return d.mapped.find(addr, segment);
}

// segment_map: the range's physical chunks created (cut where the history maps or unmaps,
// DeviceState::cuts), then one map of the range (its first chunk's handle), as PyTorch reported it.
void Converter::map_range(uint64_t t, int device, uint64_t start, uint64_t end, uint32_t stack) {
  DeviceState& d = dev(device);
  uint64_t from = start;
  for (auto cut = d.cuts.upper_bound(start); cut != d.cuts.end() && *cut < end; ++cut) {
    map_chunk(t, device, from, *cut, stack);
    from = *cut;
  }
  map_chunk(t, device, from, end, stack);
  JsonLine map = begin_action_event(t, Action::SegmentMap, start, end - start, device, stack);
  map.hex(fmt::kFieldHandle, start).num(fmt::kFieldResult, 0);
  end_event(map);
}

// One chunk: physical memory created (alloc, kind physical, handle = its start).
void Converter::map_chunk(uint64_t t, int device, uint64_t start, uint64_t end, uint32_t stack) {
  DeviceState& d = dev(device);
  auto old = d.chunks.find(start);
  if (old != d.chunks.end()) unmap_range(t, device, start, old->second.first, 0);  // remapped without an unmap
  JsonLine ev = begin_event(t, ta::api(Action::SegmentMap), fmt::Op::Alloc, fmt::Kind::Physical, start, end - start, device, stack);
  ev.num(fmt::kFieldResult, 0);
  end_event(ev);
  d.chunks[start] = {end, stack};
}

// segment_unmap: the range is unmapped, and the physical chunks it covers are released. Cut at every
// unmap's ends, the chunks lie wholly inside or outside it; one that does not (two histories' cuts
// disagree: a remap) is released whole, and its part outside re-made under its original stack.
void Converter::unmap_range(uint64_t t, int device, uint64_t start, uint64_t end, uint32_t stack) {
  DeviceState& d = dev(device);
  JsonLine ev = begin_action_event(t, Action::SegmentUnmap, start, end - start, device, stack);
  ev.num(fmt::kFieldResult, 0);
  end_event(ev);
  auto it = d.chunks.upper_bound(start);
  if (it != d.chunks.begin() && std::prev(it)->second.first > start) --it;
  std::vector<std::pair<uint64_t, std::pair<uint64_t, uint32_t>>> keep;
  while (it != d.chunks.end() && it->first < end) {
    const uint64_t cs = it->first, ce = it->second.first;
    const uint32_t cstack = it->second.second;
    JsonLine free = begin_event(t, ta::api(Action::SegmentUnmap), fmt::Op::Free, fmt::Kind::Physical, cs, ce - cs, device, stack);
    free.num(fmt::kFieldResult, 0);
    end_event(free);
    if (cs < start) keep.push_back({cs, {start, cstack}});
    if (ce > end) keep.push_back({end, {ce, cstack}});
    it = d.chunks.erase(it);
  }
  for (auto& [ks, kv] : keep) {  // only for a chunk the cuts did not foresee (remapped without an unmap)
    JsonLine ev = begin_event(t, ta::api(Action::SegmentMap), fmt::Op::Alloc, fmt::Kind::Physical, ks, kv.first - ks, device, kv.second);
    ev.num(fmt::kFieldResult, 0);
    end_event(ev);
    d.chunks[ks] = kv;
  }
}

void Converter::emit_initial_state() {
  initial_ = true;
  for (auto& [device, d] : devices_) {
    for (auto& [addr, s] : d.regular) {
      ++stats_.initial_segments;
      uint32_t stack = stack_of(s.frames);
      JsonLine ev = begin_action_event(0, Action::SegmentAlloc, addr, s.size, device, stack);
      ev.hex(fmt::kFieldStream, s.stream).num(fmt::kFieldResult, 0);
      end_event(ev);
    }
    for (auto& [start, end] : d.mapped.ranges()) {
      ++stats_.initial_segments;
      map_range(0, device, start, end, 0);
    }
  }
  for (auto& [device, d] : devices_) {
    for (auto& [addr, b] : d.blocks) {
      ++stats_.initial_blocks;
      uint32_t stack = stack_of(b.frames);
      JsonLine ev = begin_action_event(0, Action::Alloc, addr, b.size, device, stack);
      uint64_t segment;
      if (segment_of(device, addr, &segment)) ev.hex(fmt::kFieldSegment, segment);
      end_event(ev);
    }
  }
  initial_ = false;
}

void Converter::emit_entry(const Entry& e) {
  DeviceState& d = dev(e.device);
  const uint64_t t = t_of(e.time_us);
  const Action free_action = use_free_completed_ ? Action::FreeCompleted : Action::FreeRequested;
  switch (e.action) {
    case Action::Alloc:
    case Action::FreeRequested:
    case Action::FreeCompleted: {
      const bool alloc = e.action == Action::Alloc;
      if (!alloc && e.action != free_action) {
        ++stats_.ignored_entries;
        return;
      }
      // A block no live segment holds is left out (inconsistency_line), and so is its free.
      if (alloc && !inside_live_segment(e.device, e.addr, e.size)) {
        ++blocks_outside_;
        left_out_[e.device].insert(e.addr);
        return;
      }
      if (!alloc && left_out_[e.device].erase(e.addr)) return;
      uint32_t stack = stack_of(e.frames);
      JsonLine ev = begin_action_event(t, e.action, e.addr, e.size, e.device, stack);
      ev.hex(fmt::kFieldStream, e.stream);
      uint64_t segment;
      if (segment_of(e.device, e.addr, &segment)) ev.hex(fmt::kFieldSegment, segment);
      end_event(ev);
      return;
    }
    case Action::SegmentAlloc:
    case Action::SegmentFree: {
      const bool alloc = e.action == Action::SegmentAlloc;
      uint32_t stack = stack_of(e.frames);
      JsonLine ev = begin_action_event(t, e.action, e.addr, e.size, e.device, stack);
      ev.hex(fmt::kFieldStream, e.stream).num(fmt::kFieldResult, 0);
      end_event(ev);
      if (alloc) {
        Segment s;
        s.size = e.size;
        s.stream = e.stream;
        d.regular[e.addr] = s;
      } else {
        d.regular.erase(e.addr);
      }
      return;
    }
    case Action::SegmentMap:
    case Action::SegmentUnmap: {
      uint32_t stack = stack_of(e.frames);
      if (e.size == 0 || e.addr > UINT64_MAX - e.size) {
        inconsistent("mapping with an impossible range ignored", e);
        return;
      }
      if (e.action == Action::SegmentMap) {
        map_range(t, e.device, e.addr, e.addr + e.size, stack);
        d.mapped.add(e.addr, e.addr + e.size);
      } else {
        unmap_range(t, e.device, e.addr, e.addr + e.size, stack);
        d.mapped.remove(e.addr, e.addr + e.size);
      }
      return;
    }
    case Action::Oom: {
      uint32_t stack = stack_of(e.frames);
      // The device's free bytes when PyTorch gave up come on the OOM itself, as the live hook writes
      // them: whoever reads the OOM knows what cudaMalloc could still get.
      JsonLine ev = begin_action_event(t, Action::Oom, 0, e.size, e.device, stack);
      ev.hex(fmt::kFieldStream, e.stream).unum(fmt::kFieldFree, e.device_free);
      end_event(ev);
      return;
    }
    case Action::Snapshot:
    case Action::Annotate:
    case Action::Unknown:
      ++stats_.ignored_entries;
      return;
  }
}

void Converter::run() {
  const uint32_t root = doc_.root();
  uint32_t segments = kNoNode, traces = kNoNode;
  if (doc_.is(root, Kind::Dict)) {
    segments = doc_.get(root, "segments");
    traces = doc_.get(root, "device_traces");
    if (segments == kNoNode && traces == kNoNode)
      fail("not a PyTorch memory snapshot: the pickle is a dict without 'segments' or 'device_traces'");
    if ((segments != kNoNode && !doc_.is(segments, Kind::List)) || (traces != kNoNode && !doc_.is(traces, Kind::List)))
      fail("not a PyTorch memory snapshot: 'segments' and 'device_traces' must be lists");
  } else if (doc_.is(root, Kind::List)) {
    segments = root;  // torch.cuda.memory_snapshot(): the list of segments alone
  } else {
    fail(std::string("not a PyTorch memory snapshot: the pickle holds a ") + pickle::kind_name(doc_.node(root).kind) +
         ", expected a dict with 'segments' and 'device_traces'");
  }
  for (uint32_t per_device : doc_.items(traces))
    if (!doc_.is(per_device, Kind::List)) fail("not a PyTorch memory snapshot: 'device_traces' must be a list of lists");
  read_segments(segments);
  read_traces(traces);
  if (bad_numbers_) {
    warn(std::to_string(bad_numbers_) + (bad_numbers_ == 1 ? " value" : " values") +
         " where a whole number of bytes, an address or a stream belongs held something else (a float, NaN, "
         "a negative size; the first: " + first_bad_number_ + "): read as 0, the figures around them may be off");
  }
  reverse_replay();
  leave_out_blocks_outside_segments();
  for (auto& [device, list] : traces_) {
    for (const Entry& e : list) {
      if ((e.action == Action::SegmentMap || e.action == Action::SegmentUnmap) && e.size && e.addr <= UINT64_MAX - e.size) {
        dev(device).cuts.insert(e.addr);
        dev(device).cuts.insert(e.addr + e.size);
      }
    }
  }

  // Merge the devices' histories by time (each device's own order is kept).
  std::vector<const Entry*> order;
  bool have_time = false;
  for (auto& [device, list] : traces_) {
    for (const Entry& e : list) {
      order.push_back(&e);
      if (e.time_us > 0 && (!have_time || e.time_us < t0_us_)) {
        t0_us_ = e.time_us;
        have_time = true;
      }
    }
  }
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->time_us < b->time_us;
  });
  // stable_sort keeps per-device order only where times are monotonic; restore it where they are not.
  // (PyTorch's times come from one clock per process, so this is a safeguard, not the common case.)
  {
    std::map<int, size_t> next;
    std::map<int, std::vector<const Entry*>> by_dev;
    for (auto& [device, list] : traces_)
      for (const Entry& e : list) by_dev[device].push_back(&e);
    for (auto& p : order) p = by_dev[p->device][next[p->device]++];
  }

  line_.clear();
  JsonLine header(&line_);
  header.begin(fmt::kTypeHeader)
      .str(fmt::kFieldFormat, fmt::kFormatName)
      .num(fmt::kFieldVersion, fmt::kVersion1)
      .str(fmt::kFieldLibrary, "gpumemtrace-snapshot-import")
      .num(fmt::kFieldPid, 0)
      .num(fmt::kFieldPpid, 0)
      .str(fmt::kFieldExe, "")
      .raw(fmt::kFieldCmdline, "[]")
      .str(fmt::kFieldHost, "")
      .unum(fmt::kFieldStartTime, have_time ? static_cast<uint64_t>(t0_us_) * 1000u : 0)
      .str(fmt::kFieldClock, "monotonic")
      .unum(fmt::kFieldClockStart, 0)
      .str(fmt::kFieldBackend, fmt::kBackendPytorchSnapshot)
      .unum(fmt::kFieldStackDepth, 0)
      .str(fmt::kFieldOnFull, "wait")
      .str(kFieldSource, source_name_)
      .end();
  write_line();

  if (doc_.is(root, Kind::Dict)) write_settings(doc_.get(root, "allocator_settings"));
  emit_initial_state();
  for (const Entry* e : order) emit_entry(*e);
  stats_.inconsistencies = blocks_outside_ + contradictions_;
  const std::string inconsistency = inconsistency_line();
  if (!inconsistency.empty()) stats_.warnings.insert(stats_.warnings.begin(), inconsistency);

  line_.clear();
  JsonLine(&line_)
      .begin(fmt::kTypeFooter)
      .unum(fmt::kFieldEvents, stats_.events)
      .unum(fmt::kFieldDroppedTotal, 0)
      .unum(fmt::kFieldEndTime, last_t_)
      .end();
  write_line();
  if (!out_) fail("write error");
}

}  // namespace

void snapshot_bytes_to_trace(std::string bytes, const std::string& source_name, std::ostream& out,
                             ConvertStats* stats) {
  ConvertStats local;
  Document doc;
  try {
    pickle::parse(std::move(bytes), &doc);
  } catch (const pickle::ParseError& e) {
    throw SnapshotError(source_name, e.what(), e.offset());
  }
  Converter(doc, source_name, out, stats ? stats : &local).run();
}

void snapshot_to_trace(const std::string& in_path, std::ostream& out, ConvertStats* stats) {
  ConvertStats local;
  Document doc;
  try {
    pickle::parse_file(in_path, &doc);
  } catch (const pickle::ParseError& e) {
    throw SnapshotError(in_path, e.what(), e.offset());
  }
  Converter(doc, in_path, out, stats ? stats : &local).run();
}

bool looks_like_pickle(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[2] = {0, 0};
  if (!in.read(head, 2)) return false;
  return pickle::looks_like_pickle_bytes(std::string_view(head, 2));
}

}  // namespace gpumemtrace::snapshot
