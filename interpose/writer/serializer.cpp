// interpose/writer/serializer.cpp — EventRecords to trace lines: frames, stacks and modules, each once.
#include "interpose/writer/serializer.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <new>

#include "interpose/recorder/capture_backend.h"
#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "interpose/writer/format_limits.h"
#include "trace/alloc_conf.h"
#include "trace/json_line.h"
#include "trace/format.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {

namespace f = format;

namespace {

// Python frame keys and native addresses share the stack key space: tag Python keys in the top bit
// (user-space addresses never have it set on x86-64).
constexpr uint64_t kPythonKeyTag = 1ull << 63;

void append_location(std::string* out, const SourceLocation& loc) {
  out->append("{\"function\":");
  JsonLine::append_string(out, loc.function.c_str());
  if (!loc.file.empty()) {
    out->append(",\"file\":");
    JsonLine::append_string(out, loc.file.c_str());
    out->append(",\"line\":");
    JsonLine::append_uint(out, static_cast<uint64_t>(loc.line < 0 ? 0 : loc.line));
  }
  out->push_back('}');
}

// A non-negative decimal number, or -1.
long rank_number(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

// The value of variable `name` in an environment block ("NAME=value" entries, each ended by NUL).
bool environment_value(const std::string& block, const char* name, std::string* value) {
  const std::string prefix = std::string(name) + "=";
  for (size_t at = 0; at < block.size();) {
    size_t end = block.find('\0', at);
    if (end == std::string::npos) end = block.size();
    if (block.compare(at, prefix.size(), prefix) == 0) {
      *value = block.substr(at + prefix.size(), end - at - prefix.size());
      return true;
    }
    at = end + 1;
  }
  return false;
}

// A double as JSON: the shortest of %.15g / %.17g that reads back as the same value.
std::string number_text(double v) {
  char text[32];
  snprintf(text, sizeof text, "%.15g", v);
  if (strtod(text, nullptr) != v) snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace

std::string alloc_conf_from_environment(const std::string& block, const char* name) {
  std::string raw;
  if (!environment_value(block, name, &raw)) return "";
  char kept[1024];
  alloc_conf::sanitize(raw, kept, sizeof kept);
  return kept;
}

ProcessRank rank_from_environment(const std::string& block) {
  static const char* const kRank[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                      "MV2_COMM_WORLD_RANK", "SLURM_PROCID"};
  static const char* const kLocalRank[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                           "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
  static const char* const kWorldSize[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                                           "SLURM_NTASKS"};
  auto value_of = [&](const char* name) -> long {
    std::string value;
    return environment_value(block, name, &value) ? rank_number(value) : -1;
  };
  ProcessRank r;
  for (const char* name : kRank) {
    if ((r.rank = value_of(name)) >= 0) {
      r.rank_from = name;
      break;
    }
  }
  for (const char* name : kLocalRank) {
    if ((r.local_rank = value_of(name)) >= 0) break;
  }
  for (const char* name : kWorldSize) {
    if ((r.world_size = value_of(name)) >= 0) break;
  }
  return r;
}

HeaderInfo current_process_header(int stack_depth, bool drop_when_full) {
  HeaderInfo h;
  h.pid = getpid();
  h.ppid = getppid();
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) h.exe.assign(buf, static_cast<size_t>(n));
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(cmdline, arg, '\0')) h.cmdline.push_back(arg);
  std::ifstream environment("/proc/self/environ", std::ios::binary);
  const std::string block(std::istreambuf_iterator<char>(environment), {});
  h.rank = rank_from_environment(block);
  h.pytorch_alloc_conf = alloc_conf_from_environment(block, "PYTORCH_ALLOC_CONF");
  h.pytorch_cuda_alloc_conf = alloc_conf_from_environment(block, "PYTORCH_CUDA_ALLOC_CONF");
  h.pytorch_hip_alloc_conf = alloc_conf_from_environment(block, "PYTORCH_HIP_ALLOC_CONF");
  if (gethostname(buf, sizeof(buf)) == 0) h.host = buf;
  h.start_realtime_ns = util::clock_ns(CLOCK_REALTIME);
  h.start_monotonic_ns = util::monotonic_ns();
  h.stack_depth = stack_depth;
  h.drop_when_full = drop_when_full;
  return h;
}

TraceSerializer::TraceSerializer(std::string* out, bool symbolize) : out_(out), symbolize_(symbolize) {}

void TraceSerializer::header(const HeaderInfo& info) {
  // At most kMaxCmdlineArgs arguments (the line stays under format::kMaxLineBytes), then a count.
  std::string cmd = "[";
  const size_t args = std::min<size_t>(info.cmdline.size(), f::kMaxCmdlineArgs);
  for (size_t i = 0; i < args; ++i) {
    if (i) cmd.push_back(',');
    JsonLine::append_string(&cmd, info.cmdline[i].c_str());
  }
  if (args < info.cmdline.size()) {
    cmd += ",";
    JsonLine::append_string(&cmd, ("...[" + std::to_string(info.cmdline.size() - args) + " more arguments cut]").c_str());
  }
  cmd.push_back(']');
  JsonLine j(out_);
  j.begin(f::kTypeHeader)
      .str(f::kFieldFormat, f::kFormatName)
      .num(f::kFieldVersion, f::kVersion)
      .str(f::kFieldLibrary, GPUMEMTRACE_VERSION)
      .num(f::kFieldPid, info.pid)
      .num(f::kFieldPpid, info.ppid)
      .str(f::kFieldExe, info.exe)
      .raw(f::kFieldCmdline, cmd)
      .str(f::kFieldHost, info.host)
      .unum(f::kFieldStartTime, info.start_realtime_ns)
      .str(f::kFieldClock, "monotonic")
      .unum(f::kFieldClockStart, info.start_monotonic_ns)
      .str(f::kFieldBackend, backend::name())
      .num(f::kFieldStackDepth, info.stack_depth)
      .str(f::kFieldOnFull, info.drop_when_full ? "drop" : "wait");
  if (info.rank.rank >= 0) j.num(f::kFieldRank, info.rank.rank).str(f::kFieldRankFrom, info.rank.rank_from);
  if (info.rank.local_rank >= 0) j.num(f::kFieldLocalRank, info.rank.local_rank);
  if (info.rank.world_size >= 0) j.num(f::kFieldWorldSize, info.rank.world_size);
  if (!info.pytorch_alloc_conf.empty()) j.str(f::kFieldEnvAllocConf, info.pytorch_alloc_conf);
  if (!info.pytorch_cuda_alloc_conf.empty()) j.str(f::kFieldEnvCudaAllocConf, info.pytorch_cuda_alloc_conf);
  if (!info.pytorch_hip_alloc_conf.empty()) j.str(f::kFieldEnvHipAllocConf, info.pytorch_hip_alloc_conf);
  j.end();
}

void TraceSerializer::refresh_modules() {
  new_modules_.clear();
  lock_loader_walks();
  modules_.refresh(&new_modules_);
  unlock_loader_walks();
  if (new_modules_.empty()) return;
  if (symbolizer_) symbolizer_->refresh();
  for (uint32_t id : new_modules_) {
    const Module& m = modules_.by_id(id);
    python::note_module_loaded(m.path.c_str());  // a libpython loaded late: the frame reader looks again
    const size_t from = out_->size();
    JsonLine(out_)
        .begin(f::kTypeModule)
        .unum(f::kFieldId, m.id)
        .str(f::kFieldPath, m.path)
        .hex(f::kFieldBase, m.base)
        .unum(f::kFieldSize, m.hi - m.lo)
        .str(f::kFieldBuildId, m.build_id)
        .end();
    keep_definition(from);
  }
}

uint32_t TraceSerializer::native_frame_id(uintptr_t ip) {
  auto it = native_frames_.find(ip);
  if (it != native_frames_.end()) return it->second;
  const Module* mod = modules_.find(ip);
  if (!mod) {  // loaded since the last scan (dlopen): rescan once
    refresh_modules();
    mod = modules_.find(ip);
  }
  const uint32_t id = next_frame_id_++;
  native_frames_.emplace(ip, id);
  const size_t from = out_->size();
  JsonLine j(out_);
  j.begin(f::kTypeFrame).unum(f::kFieldId, id).hex(f::kFieldIp, ip);
  if (mod) j.unum(f::kFieldModule, mod->id).hex(f::kFieldOffset, ip - mod->base);
  Symbolized s;
  if (symbolize(ip, &s)) {
    j.str(f::kFieldFunction, s.outer.function);
    if (!s.outer.file.empty()) j.str(f::kFieldFile, s.outer.file).num(f::kFieldLine, std::max(s.outer.line, 0));
    if (!s.inlined.empty()) {
      std::string list = "[";
      for (size_t i = 0; i < s.inlined.size() && i < static_cast<size_t>(f::kMaxInlinedLevels); ++i) {
        if (i) list.push_back(',');
        append_location(&list, s.inlined[i]);
      }
      list.push_back(']');
      j.raw(f::kFieldInlined, list);
    }
  }
  j.end();
  keep_definition(from);
  return id;
}

bool TraceSerializer::symbolize(uintptr_t ip, Symbolized* out) {
  if (!symbolize_) return false;
  try {
    // Made on the first frame, not with the serializer: the trace's header does not wait for it.
    if (!symbolizer_) symbolizer_ = std::make_unique<Symbolizer>();
    *out = symbolizer_->symbolize(ip);
    return true;
  } catch (const std::bad_alloc&) {
    // Out of memory (RLIMIT_AS), here or in libdw (whose own handler would exit the process:
    // symbolizer.h): frames go on with module and offset only, which gpumem-report can name later.
    // The symbolizer's state is left as the failure left it, never used again.
    (void)symbolizer_.release();
    symbolize_ = false;
    log_line("out of memory while naming frames; symbolization turned off (gpumem-report names them from the "
             "module files)");
    return false;
  }
}

uint32_t TraceSerializer::python_frame_id(const python::PythonFrameRef& ref) {
  const uint64_t key = python::python_frame_key(ref);
  auto it = python_frames_.find(key);
  if (it != python_frames_.end()) return it->second;
  python::PythonFrame frame;
  if (!python::resolve_python_frame(ref, &frame)) return 0;
  const uint32_t id = next_frame_id_++;
  python_frames_.emplace(key, id);
  const size_t from = out_->size();
  JsonLine(out_)
      .begin(f::kTypeFrame)
      .unum(f::kFieldId, id)
      .str(f::kFieldLang, f::kLangPython)
      .str(f::kFieldFunction, frame.function)
      .str(f::kFieldFile, frame.file)
      .num(f::kFieldLine, std::max<int64_t>(frame.line, 0))
      .end();
  keep_definition(from);
  return id;
}

uint32_t TraceSerializer::stack_id(const EventRecord& r) {
  if (r.native_depth == 0 && r.python_depth == 0) return 0;
  key_.clear();
  if (r.python_depth == 0) {  // the common case: the stack is the native one, no merge needed
    key_.assign(r.native, r.native + r.native_depth);
  } else {
    // Python frames: first by the raw capture, so a repeated one costs a hash, not a merge. The
    // depths lead the key (they split it into its native and Python parts unambiguously).
    raw_key_.assign(1, (static_cast<uint64_t>(r.native_depth) << 32) | static_cast<uint32_t>(r.python_depth));
    raw_key_.insert(raw_key_.end(), r.native, r.native + r.native_depth);
    for (int i = 0; i < r.python_depth; ++i) {
      raw_key_.push_back(r.python[i].a);
      raw_key_.push_back(r.python[i].b);
    }
    auto raw = raw_stacks_.find(raw_key_);
    if (raw != raw_stacks_.end()) return raw->second;
    python::merge_stacks(r.native, r.native_depth, r.python, r.python_depth, &merged_);
    for (const python::MergedFrame& m : merged_)
      key_.push_back(m.is_python ? (python::python_frame_key(r.python[m.python_index]) | kPythonKeyTag) : m.ip);
  }
  uint32_t id;
  auto it = stacks_.find(key_);
  if (it != stacks_.end()) {
    id = it->second;
  } else {
    frame_ids_.clear();
    if (r.python_depth == 0) {
      for (uint64_t ip : key_) frame_ids_.push_back(native_frame_id(ip));
    } else {
      for (const python::MergedFrame& m : merged_) {
        const uint32_t fid = m.is_python ? python_frame_id(r.python[m.python_index]) : native_frame_id(m.ip);
        if (fid) frame_ids_.push_back(fid);  // 0: a Python frame that could not be resolved
      }
    }
    id = next_stack_id_++;
    stacks_.emplace(key_, id);
    std::string list = "[";
    for (size_t i = 0; i < frame_ids_.size(); ++i) {
      if (i) list.push_back(',');
      JsonLine::append_uint(&list, frame_ids_[i]);
    }
    list.push_back(']');
    const size_t from = out_->size();
    JsonLine(out_).begin(f::kTypeStack).unum(f::kFieldId, id).raw(f::kFieldFrames, list).end();
    keep_definition(from);
  }
  if (r.python_depth > 0) raw_stacks_.emplace(raw_key_, id);
  return id;
}

uint32_t TraceSerializer::site_id(const EventRecord& r, uint32_t stack) {
  const SiteKey key{r.api ? r.api : "", r.driver_api, r.tid, stack, limits::device(r.device), r.op, r.kind,
                    (r.flags & kDelayed) != 0};
  auto it = sites_.find(key);
  if (it != sites_.end()) return it->second;
  const uint32_t id = next_site_id_++;
  sites_.emplace(key, id);
  const size_t from = out_->size();
  JsonLine j(out_);
  j.begin(f::kTypeSite).unum(f::kFieldId, id).unum(f::kFieldTid, key.tid).str(f::kFieldApi, key.api);
  if (key.driver_api) j.str(f::kFieldDriverApi, key.driver_api);
  j.str(f::kFieldOp, f::op_name(key.op))
      .str(f::kFieldKind, f::kind_name(key.kind))
      .num(f::kFieldDevice, key.device)
      .unum(f::kFieldStack, stack);
  if (key.delayed) j.flag(f::kFieldDelayed);
  j.end();
  keep_definition(from);
  return id;
}

uint32_t TraceSerializer::event(const EventRecord& r, uint32_t stack, bool initial) {
  const uint32_t site = site_id(r, stack);
  JsonLine j(out_);
  // The time delta is signed: a delayed event may be older than the line before it.
  j.begin_keyed(f::kFieldEventSite, site).num(f::kFieldTimeDelta, static_cast<int64_t>(r.time_ns - last_time_ns_));
  if (r.seq != last_seq_ + 1) j.unum(f::kFieldSeqJump, r.seq);
  last_seq_ = r.seq;
  last_time_ns_ = r.time_ns;
  if (f::op_has_addr(r.op)) j.hex(f::kFieldShortAddr, r.addr);
  if (f::op_has_size(r.op))  // frees: 0 when the API does not say; beyond the format: clamped, kept exactly
    limits::write_size(j, f::kFieldShortSize, r.size, limits::size_limit(f::op_has_addr(r.op), r.addr),
                       (r.flags & kSizeOverflow) != 0, true);
  limits::write_device_exact(j, r.device);
  if (r.flags & kHasStream) j.hex(f::kFieldStream, r.stream);
  if (r.flags & kHasPoolName)
    j.str(f::kFieldPool, r.pool_name);
  else if (r.flags & kHasPool)
    j.hex(f::kFieldPool, r.pool);
  if (r.flags & kHasSegment) j.hex(f::kFieldSegment, r.segment);
  if (r.flags & kHasHandle) j.hex(f::kFieldHandle, r.handle);
  if (r.flags & kHasMemInfo) {
    limits::write_count(j, f::kFieldFree, f::kFieldFreeExact, r.free_bytes);
    limits::write_count(j, f::kFieldTotal, f::kFieldTotalExact, r.total_bytes);
  }
  if (r.flags & kHasLabel) j.str(f::kFieldLabel, r.label_text());
  if (r.flags & kHasRange) j.unum(f::kFieldRange, r.range);
  if ((r.flags & kHasResult) && r.result) j.num(f::kFieldShortResult, r.result);
  if (initial) j.flag(f::kFieldInitial);
  j.end();
  ++events_;
  return stack;
}

void TraceSerializer::allocator_settings(const EventRecord& r) {
  JsonLine j(out_);
  j.begin(f::kTypeAllocatorSettings)
      .unum(f::kFieldSeq, r.seq)
      .unum(f::kFieldTime, r.time_ns)
      .unum(f::kFieldTid, r.tid)
      .str(f::kFieldSource, r.api ? r.api : "")
      .num(f::kFieldDevice, limits::device(r.device));
  if (r.flags & kHasLabel) j.str(f::kFieldConf, r.label_text());
  if (r.flags & kHasFraction) j.raw(f::kFieldFraction, number_text(r.fraction));
  j.end();
}

void TraceSerializer::gc(const EventRecord& r) {
  // The library refuses a start after the end (gpumemtrace_report_gc); kept so here too.
  const uint64_t began = (r.flags & kHasBegan) && r.began_ns <= r.time_ns ? r.began_ns : r.time_ns;
  JsonLine(out_)
      .begin(f::kTypeGc)
      .unum(f::kFieldSeq, r.seq)
      .unum(f::kFieldTime, began)
      .unum(f::kFieldEndTime, r.time_ns)
      .unum(f::kFieldTid, r.tid)
      .end();
}

void TraceSerializer::pause(const EventRecord& r) {
  JsonLine(out_)
      .begin(r.op == f::Op::Pause ? f::kTypePause : f::kTypeResume)
      .unum(f::kFieldSeq, r.seq)
      .unum(f::kFieldTime, r.time_ns)
      .unum(f::kFieldTid, r.tid)
      .end();
}

void TraceSerializer::device(int32_t device, const char* name, uint64_t total, uint64_t free_bytes) {
  const size_t from = out_->size();
  JsonLine j(out_);
  j.begin(f::kTypeDevice).num(f::kFieldDevice, limits::device(device)).str(f::kFieldName, name);
  limits::write_count(j, f::kFieldTotal, f::kFieldTotalExact, total);
  limits::write_count(j, f::kFieldFree, f::kFieldFreeExact, free_bytes);
  j.end();
  keep_definition(from);
}

void TraceSerializer::keep_definition(size_t from) {
  if (keep_definitions_) definitions_.append(*out_, from, std::string::npos);
}

void TraceSerializer::rewrite_definitions() { out_->append(definitions_); }

void TraceSerializer::restart_deltas() { last_seq_ = last_time_ns_ = 0; }

void TraceSerializer::dropped(uint64_t count, uint64_t total) {
  JsonLine(out_).begin(f::kTypeDropped).unum(f::kFieldCount, count).unum(f::kFieldDroppedTotal, total).end();
}

void TraceSerializer::capped(const EventRecord& r, uint64_t bytes, uint64_t max_bytes) {
  JsonLine(out_)
      .begin(f::kTypeCapped)
      .unum(f::kFieldSeq, r.seq)
      .unum(f::kFieldTime, r.time_ns)
      .unum(f::kFieldSize, bytes)
      .unum(f::kFieldMaxBytes, max_bytes)
      .end();
}

void TraceSerializer::live(const LiveAllocation& a) {
  JsonLine j(out_);
  j.begin(f::kTypeLive)
      .unum(f::kFieldSeq, a.seq)
      .unum(f::kFieldTime, a.time_ns)
      .unum(f::kFieldTid, a.tid)
      .str(f::kFieldApi, a.api ? a.api : "")
      .str(f::kFieldOp, f::op_name(a.op))
      .str(f::kFieldKind, f::kind_name(a.kind))
      .hex(f::kFieldAddr, a.addr);
  limits::write_size(j, f::kFieldSize, a.size, limits::size_limit(true, a.addr), false, false);
  j.num(f::kFieldDevice, limits::device(a.device)).unum(f::kFieldStack, a.stack);
  limits::write_device_exact(j, a.device);
  j.end();
}

void TraceSerializer::footer(uint64_t events, uint64_t dropped_total, uint64_t end_time_ns, uint64_t not_written,
                             const ProcessEnd& end) {
  JsonLine j(out_);
  j.begin(f::kTypeFooter)
      .unum(f::kFieldEvents, events)
      .unum(f::kFieldDroppedTotal, dropped_total)
      .unum(f::kFieldEndTime, end_time_ns);
  if (not_written) j.unum(f::kFieldNotWritten, not_written);
  if (end.how != f::End::Unknown) j.str(f::kFieldEnd, f::end_name(end.how));
  if (end.how == f::End::Signal) j.num(f::kFieldSignal, end.signal);
  else if (end.exit_status >= 0) j.num(f::kFieldExitStatus, end.exit_status);
  j.end();
}

}  // namespace gpumemtrace
