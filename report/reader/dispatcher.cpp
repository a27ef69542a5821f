// report/reader/dispatcher.cpp — see dispatcher.h.
#include "report/reader/dispatcher.h"

#include <algorithm>

namespace gpumemtrace::report::reader {

bool blank(std::string_view text) {
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

void Dispatcher::finish() {
  merger_.finish();
  for (std::string& warning : offline_.warnings()) result_.warnings.push_back(std::move(warning));
  if (merger_.late()) {
    result_.warnings.push_back(std::to_string(merger_.late()) +
                               " delayed events came after a sync that covered their time: merged at the "
                               "next sync (their order is approximate)");
  }
  if (merger_.forced()) {
    result_.warnings.push_back(std::to_string(merger_.forced()) +
                               " events handed on before their sync (more than " +
                               std::to_string(EventMerger::kDefaultMaxBuffered) + " events or " +
                               std::to_string(EventMerger::kMaxHeldBytes >> 20) +
                               " MiB between two syncs): the order around them is approximate");
  }
  if (!clamped_first_.empty()) {
    result_.warnings.push_back(std::to_string(clamped_) + (clamped_ == 1 ? " value" : " values") +
                               " the trace format cannot hold, clamped by the recorder (the first: " + clamped_first_ +
                               "); failed requests are reported with their exact size");
  }
}

void Dispatcher::dispatch(const Fields& f, uint64_t line_number) {
  ignored_ = false;
  line_ = line_number;
  using B = Fields::Bit;
  // Version 2 event lines have no "type": their first key is the site (version_ is 0 until the
  // header is read).
  const bool compact = !f.has(B::kType) && version_ >= fmt::kVersion2 && f.has(B::kSite);
  if (!f.has(B::kType) && !compact) fail("record without \"type\"");
  if (line_number == first_line_) {
    if (f.type != fmt::kTypeHeader) fail("not a gpumemtrace trace (the first line is not a header)");
    return header(f);
  }
  if (result_.footer_seen && !warned_after_footer_) {
    result_.warnings.push_back("line " + std::to_string(line_number) + ": records after the footer");
    warned_after_footer_ = true;
  }
  if (compact) return compact_event(f);
  if (f.type == fmt::kTypeEvent) {
    if (version_ >= fmt::kVersion2) fail("a version 1 event line in a version 2 trace");
    return event(f);
  }
  if (f.type == fmt::kTypeSite && version_ >= fmt::kVersion2) return site(f);
  if (f.type == fmt::kTypeFrame) return frame(f);
  if (f.type == fmt::kTypeStack) return stack(f);
  if (f.type == fmt::kTypeModule) {
    if (!f.has(B::kId) || f.id == 0) fail("module without a valid \"id\"");
    if (symbols_.modules() >= kMaxModules && !symbols_.has_module(ModuleId(static_cast<uint32_t>(f.id)))) {
      too_many("modules", kMaxModules);
    }
    symbols_.add_module(ModuleId(static_cast<uint32_t>(f.id)), std::string(f.path));
    offline_text_bytes_ += f.path.size() + f.build_id.size();  // the offline symbolizer's copy
    check_text();
    offline_.add_module(ModuleId(static_cast<uint32_t>(f.id)), f.path, f.build_id);
    return;
  }
  if (f.type == fmt::kTypeDevice) {
    if (!f.has(B::kDevice)) fail("device record without \"device\"");
    DeviceInfo info;
    info.device = static_cast<int32_t>(f.device);
    info.name = std::string(f.name);
    info.total = f.total;
    info.free = f.free;
    info.has_free = f.has(B::kFree);
    if (f.has(B::kTotalExact)) note_clamped(fmt::kFieldTotalExact, std::to_string(f.total_exact));
    if (f.has(B::kFreeExact)) note_clamped(fmt::kFieldFreeExact, std::to_string(f.free_exact));
    return handler_.on_device(info);
  }
  if (f.type == fmt::kTypeDropped) {
    if (!f.has(B::kCount)) fail("dropped record without \"count\"");
    return handler_.on_dropped(f.count);
  }
  if (f.type == fmt::kTypeFooter) {
    result_.footer_seen = true;
    merger_.finish();  // the events before the footer, before it
    return handler_.on_footer(Footer{f.events, f.dropped_total, f.end_time, f.not_written, fmt::parse_end(f.end),
                                     static_cast<int32_t>(f.exit_status), static_cast<int32_t>(f.signal)});
  }
  if (f.type == fmt::kTypeCapped) {
    if (!f.has(B::kSeq)) fail("capped record without \"seq\"");
    if (f.t_negative) fail("field \"t\": expected an unsigned integer");
    if (result_.capped) fail("a second capped record");
    result_.capped = true;
    merger_.finish();  // the events before the cap, before it
    return handler_.on_capped(Capped{f.seq, f.t, f.size, f.max_bytes});
  }
  if (f.type == fmt::kTypeLive) return live(f);
  if (f.type == fmt::kTypeAllocatorSettings) return allocator_settings(f);
  if (f.type == fmt::kTypeGc) return gc(f);
  if (f.type == fmt::kTypePause) return handler_.on_pause(timeline_record(f, fmt::kTypePause, Op::Pause));
  if (f.type == fmt::kTypeResume) return handler_.on_pause(timeline_record(f, fmt::kTypeResume, Op::Resume));
  if (f.type == fmt::kTypeHeader) fail("a second header");
  // Unknown record types are skipped: version 1 readers ignore what they do not know.
  ignored_ = true;
}

void Dispatcher::header(const Fields& f) {
  using B = Fields::Bit;
  if (!f.has(B::kFormat) || f.format != fmt::kFormatName) {
    fail("not a gpumemtrace trace (header \"format\" is not \"gpumemtrace\")");
  }
  if (!f.has(B::kVersion)) fail("header without \"version\"");
  if (f.version != static_cast<uint64_t>(fmt::kVersion1) && f.version != static_cast<uint64_t>(fmt::kVersion2)) {
    fail("unsupported trace version " + std::to_string(f.version) + " (this reader knows " +
         std::to_string(fmt::kVersion1) + " and " + std::to_string(fmt::kVersion2) + ")");
  }
  version_ = static_cast<int>(f.version);
  Header h;
  h.pid = f.pid;
  h.ppid = f.ppid;
  // A rank is a place in a job: a negative one is no place (not set).
  h.rank = std::max<int64_t>(f.rank, -1);
  h.local_rank = std::max<int64_t>(f.local_rank, -1);
  h.world_size = std::max<int64_t>(f.world_size, -1);
  h.rank_from = std::string(f.rank_from);
  h.exe = std::string(f.exe);
  h.host = std::string(f.host);
  h.library = std::string(f.library);
  h.backend = std::string(f.backend);
  h.cmdline = f.cmdline;
  h.start_time_ns = f.start_time;
  h.clock_start_ns = f.clock_start;
  h.env_alloc_conf = std::string(f.env_alloc_conf);
  h.env_cuda_alloc_conf = std::string(f.env_cuda_alloc_conf);
  h.env_hip_alloc_conf = std::string(f.env_hip_alloc_conf);
  handler_.on_header(h);
}

void Dispatcher::frame(const Fields& f) {
  using B = Fields::Bit;
  if (!f.has(B::kId) || f.id == 0) fail("frame without a valid \"id\"");
  if (f.has(B::kModule) && f.module != 0 && !symbols_.has_module(ModuleId(static_cast<uint32_t>(f.module)))) {
    fail("frame refers to undefined module " + std::to_string(f.module));
  }
  SymbolTable::Frame frame;
  frame.function = std::string(f.function);
  frame.file = std::string(f.file);
  frame.line = static_cast<uint32_t>(f.line);
  frame.module = ModuleId(static_cast<uint32_t>(f.module));
  frame.ip = f.ip;
  frame.offset = f.offset;
  frame.python = f.lang == fmt::kLangPython;
  frame.inlined = f.inlined;
  if (OfflineSymbolizer::needs_symbols(frame, f.has(B::kFunction))) offline_.symbolize(frame);
  if (symbols_.frames() >= kMaxFrames) too_many("frames", kMaxFrames);
  if (!symbols_.add_frame(FrameId(static_cast<uint32_t>(f.id)), std::move(frame))) {
    fail("frame id " + std::to_string(f.id) + " defined twice");
  }
  check_text();
}

void Dispatcher::too_many(const char* what, uint64_t limit) {
  fail("more than " + std::to_string(limit) + " " + what + " defined (the reader's limit, docs/security.md)");
}

void Dispatcher::check_text() const {
  if (symbols_.text_bytes() + site_text_bytes_ + offline_text_bytes_ > kMaxSymbolTextBytes) {
    fail("more than " + std::to_string(kMaxSymbolTextBytes >> 20) +
         " MiB of names defined (module paths, function, file and API names; the reader's limit, docs/security.md)");
  }
}

void Dispatcher::stack(const Fields& f) {
  using B = Fields::Bit;
  if (!f.has(B::kId) || f.id == 0) fail("stack without a valid \"id\"");
  if (!f.has(B::kFrames)) fail("stack without \"frames\"");
  std::vector<FrameId> frames;
  frames.reserve(f.frames.size());
  for (uint32_t id : f.frames) {
    if (!symbols_.has_frame(FrameId(id))) fail("stack refers to undefined frame " + std::to_string(id));
    frames.push_back(FrameId(id));
  }
  const SymbolTable::Extent extent = symbols_.extent(frames);
  if (extent.frames > kMaxLogicalFrames) {
    fail("stack " + std::to_string(f.id) + " has " + std::to_string(extent.frames) + " frames with its inlined calls, more than " +
         std::to_string(kMaxLogicalFrames) + " (the reader's limit, docs/security.md)");
  }
  if (extent.text_bytes > kMaxStackTextBytes) {
    fail("stack " + std::to_string(f.id) + " has " + std::to_string(extent.text_bytes >> 10) +
         " KiB of names with its inlined calls, more than " + std::to_string(kMaxStackTextBytes >> 10) +
         " KiB (the reader's limit, docs/security.md)");
  }
  if (symbols_.stacks() >= kMaxStacks) too_many("stacks", kMaxStacks);
  stack_refs_ += frames.size();
  if (stack_refs_ > kMaxStackFrameRefs) {
    fail("more than " + std::to_string(kMaxStackFrameRefs) +
         " frame references in all stacks together (the reader's limit, docs/security.md)");
  }
  if (!symbols_.add_stack(StackId(static_cast<uint32_t>(f.id)), std::move(frames))) {
    fail("stack id " + std::to_string(f.id) + " defined twice");
  }
}

void Dispatcher::event(const Fields& f) {
  using B = Fields::Bit;
  if (!f.has(B::kSeq)) fail("event without \"seq\"");
  if (f.seq <= last_seq_) {
    fail("event seq " + std::to_string(f.seq) + " does not increase (previous " +
         std::to_string(last_seq_) + ")");
  }
  if (result_.capped) fail("event after the capped record");
  last_seq_ = f.seq;
  const Event e = to_event(f, "event");
  if (e.op == Op::Sync) return merger_.sync(e.t);  // a promise for the reader, not a memory event
  ++result_.events;
  merger_.push(e);
}

void Dispatcher::site(const Fields& f) {
  using B = Fields::Bit;
  if (!f.has(B::kId) || f.id != sites_.size() + 1) {
    fail("site id " + std::to_string(f.id) + " out of order (the next is " + std::to_string(sites_.size() + 1) + ")");
  }
  Site e;
  if (!f.has(B::kOp)) fail("site without \"op\"");
  if (!fmt::parse_op(f.op, &e.op)) fail("unknown op \"" + std::string(f.op) + "\"");
  if (!f.kind.empty() && !fmt::parse_kind(f.kind, &e.kind)) fail("unknown kind \"" + std::string(f.kind) + "\"");
  if (!symbols_.has_stack(StackId(static_cast<uint32_t>(f.stack)))) {
    fail("site refers to undefined stack " + std::to_string(f.stack));
  }
  e.tid = f.tid;
  e.device = static_cast<int32_t>(f.device);
  e.stack = StackId(static_cast<uint32_t>(f.stack));
  e.delayed = f.delayed;
  if (sites_.size() >= kMaxSites) too_many("sites", kMaxSites);
  // Interned: a few API names serve every site (an unordered_set's elements never move).
  auto [api, added] = site_apis_.emplace(f.api);
  if (added) {
    site_text_bytes_ += api->size();
    check_text();
  }
  e.api = *api;
  sites_.push_back(e);
}

void Dispatcher::compact_event(const Fields& f) {
  using B = Fields::Bit;
  if (f.site == 0 || f.site > sites_.size()) fail("event refers to undefined site " + std::to_string(f.site));
  const uint64_t seq = f.has(B::kSeqJump) ? f.seq_jump : last_seq_ + 1;
  if (seq <= last_seq_) {
    fail("event seq " + std::to_string(seq) + " does not increase (previous " + std::to_string(last_seq_) + ")");
  }
  if (result_.capped) fail("event after the capped record");
  last_seq_ = seq;
  last_time_ += f.t;  // a signed delta, as two's complement: wraps like the subtraction that made it
  const Site& site = sites_[f.site - 1];
  if (f.short_addr > UINT64_MAX - f.short_size) fail("address range overflows 64 bits");
  Event e;
  e.op = site.op;
  e.kind = site.kind;
  e.tid = site.tid;
  e.device = site.device;
  e.stack = site.stack;
  e.delayed = site.delayed;
  e.api = site.api;
  e.seq = seq;
  e.t = last_time_;
  e.addr = f.short_addr;
  e.size = f.short_size;
  e.result = f.short_result;
  e.initial = f.initial;  // a flight recorder's checkpoint (interpose/writer/flight.cpp)
  fill_optional(f, e);
  exact_values(f, e);
  if (e.op == Op::Sync) return merger_.sync(e.t);
  ++result_.events;
  merger_.push(e, /*stable_api=*/true);  // the site's name, interned in site_apis_ for the whole read
}

void Dispatcher::live(const Fields& f) {
  if (!result_.capped) fail("live record before the capped record");
  const Event e = to_event(f, "live record");
  if (e.op != Op::Alloc && e.op != Op::BlockAlloc) fail("live record with op other than alloc or block_alloc");
  handler_.on_live(e);
}

Event Dispatcher::timeline_record(const Fields& f, const std::string& type, Op op) {
  using B = Fields::Bit;
  if (!f.has(B::kSeq)) fail(type + " record without \"seq\"");
  if (f.t_negative) fail("field \"t\": expected an unsigned integer");
  if (f.seq <= last_seq_) {
    fail(type + " seq " + std::to_string(f.seq) + " does not increase (previous " + std::to_string(last_seq_) + ")");
  }
  if (result_.capped) fail(type + " record after the capped record");
  Event e;
  e.op = op;
  e.kind = Kind::None;
  e.seq = f.seq;
  e.t = f.t;
  e.tid = f.tid;
  return e;
}

void Dispatcher::allocator_settings(const Fields& f) {
  Event e = timeline_record(f, fmt::kTypeAllocatorSettings, Op::AllocatorSettings);
  if (f.has_fraction && !(f.fraction >= 0.0 && f.fraction <= 1.0)) fail("field \"fraction\": expected 0 to 1");
  e.device = static_cast<int32_t>(f.device);
  e.api = f.source;
  e.label = f.conf;
  e.fraction = f.fraction;
  e.has_fraction = f.has_fraction;
  merger_.push(e);
}

void Dispatcher::gc(const Fields& f) {
  Event e = timeline_record(f, fmt::kTypeGc, Op::Gc);
  if (f.end_time < f.t) fail("gc record ends (end_time) before it begins (t)");
  e.end_time = f.end_time;
  merger_.push(e);
}

Event Dispatcher::to_event(const Fields& f, const char* what) {
  using B = Fields::Bit;
  Event e;
  if (!f.has(B::kOp)) fail(std::string(what) + " without \"op\"");
  if (f.t_negative) fail("field \"t\": expected an unsigned integer");
  if (!fmt::parse_op(f.op, &e.op)) fail("unknown op \"" + std::string(f.op) + "\"");
  if (!f.kind.empty() && !fmt::parse_kind(f.kind, &e.kind)) {
    fail("unknown kind \"" + std::string(f.kind) + "\"");
  }
  if (!symbols_.has_stack(StackId(static_cast<uint32_t>(f.stack)))) {
    fail("event refers to undefined stack " + std::to_string(f.stack));
  }
  if (f.addr > UINT64_MAX - f.size) fail("address range overflows 64 bits");
  e.seq = f.seq;
  e.t = f.t;
  e.tid = f.tid;
  e.addr = f.addr;
  e.size = f.size;
  e.device = static_cast<int32_t>(f.device);
  e.stack = StackId(static_cast<uint32_t>(f.stack));
  e.result = f.result;
  e.api = f.api;
  e.delayed = f.delayed;
  e.initial = f.initial;
  fill_optional(f, e);
  exact_values(f, e);
  return e;
}

void Dispatcher::exact_values(const Fields& f, Event& e) {
  using B = Fields::Bit;
  if (f.has(B::kSizeExact)) {
    note_clamped(fmt::kFieldSizeExact, f.size_out_of_range ? std::string(fmt::kOutOfRange) : std::to_string(f.size_exact));
    const bool request = e.op == Op::BlockOom || (e.op == Op::Alloc && e.result != 0);
    if (request && f.size_exact > e.size && e.addr <= UINT64_MAX - f.size_exact) e.size = f.size_exact;
  }
  if (f.has(B::kDeviceExact)) note_clamped(fmt::kFieldDeviceExact, std::to_string(f.device_exact));
  if (f.has(B::kFreeExact)) note_clamped(fmt::kFieldFreeExact, std::to_string(f.free_exact));
  if (f.has(B::kTotalExact)) note_clamped(fmt::kFieldTotalExact, std::to_string(f.total_exact));
}

void Dispatcher::note_clamped(const char* field, const std::string& value) {
  if (clamped_++ == 0) clamped_first_ = std::string(field) + " " + value + " on line " + std::to_string(line_);
}

void Dispatcher::fill_optional(const Fields& f, Event& e) {
  using B = Fields::Bit;
  e.segment = f.segment;
  e.has_segment = f.has(B::kSegment);
  e.handle = f.handle;
  e.has_handle = f.has(B::kHandle);
  e.stream = f.stream;
  e.free = f.free;
  e.total = f.total;
  e.has_meminfo = f.has(B::kFree) || f.has(B::kTotal);
  e.pool = f.pool;
  e.label = f.label;
  e.range = f.range;
}

}  // namespace gpumemtrace::report::reader
