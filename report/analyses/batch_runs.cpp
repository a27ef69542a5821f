// report/analyses/batch_runs.cpp — see batch_runs.h.
#include "report/analyses/batch_runs.h"

#include <regex>

#include "report/analyses/analyze.h"
#include "trace/torch_actions.h"

namespace gpumemtrace::report {

namespace {

using torch_actions::Action;

constexpr std::string_view kTorchPrefix = "torch.";  // + PyTorch's action name (trace/torch_actions.h)

bool is_torch(std::string_view api) {
  return api.size() > kTorchPrefix.size() && api.substr(0, kTorchPrefix.size()) == kTorchPrefix;
}

BatchRecord::Api torch_api(std::string_view api) {
  switch (torch_actions::parse(api.substr(kTorchPrefix.size()))) {
    case Action::Alloc: return BatchRecord::TorchAlloc;
    case Action::Oom: return BatchRecord::TorchOom;
    case Action::FreeRequested: return BatchRecord::TorchFreeRequested;
    case Action::FreeCompleted: return BatchRecord::TorchFreeCompleted;
    case Action::SegmentAlloc: return BatchRecord::TorchSegmentAlloc;
    case Action::SegmentFree: return BatchRecord::TorchSegmentFree;
    case Action::SegmentMap: return BatchRecord::TorchSegmentMap;
    case Action::SegmentUnmap: return BatchRecord::TorchSegmentUnmap;
    default: return BatchRecord::TorchOther;
  }
}

// The events AllocatorReplay::apply acts on (replay.cpp), and no others.
bool replay_reads(const Event& e, bool torch) {
  if (e.device < 0) return false;
  switch (e.op) {
    case Op::MemInfo: return e.has_meminfo;
    case Op::Alloc: return torch || e.result != 0 || e.kind == Kind::Device || e.kind == Kind::Physical;
    case Op::Free: return true;
    case Op::BlockAlloc:
    case Op::BlockFree:
    case Op::BlockOom:
    case Op::Map:
    case Op::Unmap: return torch;
    default: return false;
  }
}

// FNV-1a, 64 bits: a site's key from its frames' names, stable across runs of one program.
struct KeyHash {
  uint64_t h = 14695981039346656037ull;
  void add(std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator, so that "ab"+"c" and "a"+"bc" differ
  }
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
};

std::string_view basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::optional<uint64_t> number(const std::string& digits) {
  if (digits.empty() || digits.size() > 9) return std::nullopt;  // up to 999,999,999
  const uint64_t value = std::stoull(digits);
  if (value == 0) return std::nullopt;
  return value;
}

}  // namespace

std::optional<uint64_t> batch_in_name(std::string_view path) {
  static const std::regex pattern("(?:^|[^a-z0-9])(?:batch[_-]?size|batchsize|batch|bs|b)[-_=]?([0-9]+)(?=[^0-9]|$)",
                                  std::regex::icase);
  const std::string name(basename(path));
  std::optional<uint64_t> found;
  for (auto it = std::sregex_iterator(name.begin(), name.end(), pattern); it != std::sregex_iterator(); ++it) {
    const std::optional<uint64_t> value = number((*it)[1].str());
    if (!value) continue;
    if (found && *found != *value) return std::nullopt;  // two sizes in one name: neither is taken
    found = value;
  }
  return found;
}

std::optional<uint64_t> batch_in_mark(std::string_view label) {
  static const std::regex pattern("\\s*(?:batch[_ ]?size|batchsize|batch|bs)\\s*[=: ]\\s*([0-9]+)\\s*", std::regex::icase);
  std::smatch match;
  const std::string text(label);
  if (!std::regex_match(text, match, pattern)) return std::nullopt;
  return number(match[1].str());
}

BatchRunRecorder::BatchRunRecorder(const SymbolTable& symbols, std::string file)
    : symbols_(symbols), roles_(symbols, no_rules_) {
  run_.file = std::move(file);
}

void BatchRunRecorder::keep(const Event& e, BatchRecord::Api api) {
  if (run_.records.size() >= kMaxBatchEvents) {
    throw TraceError(run_.file, 0, "more than " + std::to_string(kMaxBatchEvents) +
                                       " PyTorch and CUDA memory events: too many for the batch what-if, which keeps "
                                       "each run's events in memory (" + std::to_string(kRecordBytes) +
                                       " bytes each); record fewer iterations");
  }
  BatchRecord r;
  r.seq = e.seq;
  r.t = e.t;
  r.addr = e.addr;
  r.size = e.size;
  r.stream = e.stream;
  r.segment = e.segment;
  r.device = e.device;
  r.result = static_cast<int32_t>(e.result);
  r.op = e.op;
  r.kind = e.kind;
  r.api = api;
  r.flags = static_cast<uint8_t>((e.initial ? BatchRecord::Initial : 0) | (e.has_segment ? BatchRecord::HasSegment : 0) |
                                 (e.has_meminfo ? BatchRecord::HasMeminfo : 0));
  if (e.op == Op::MemInfo) {
    r.addr = e.free;
    r.size = e.total;
  } else if (e.op == Op::BlockOom && e.has_meminfo) {
    r.segment = e.free;
  }
  run_.records.push_back(r);
}

void BatchRunRecorder::on_allocator_settings(const Event& e) {
  BatchRecord r;
  r.seq = e.seq;
  r.t = e.t;
  r.device = e.device;
  r.op = e.op;
  r.api = BatchRecord::Settings;
  r.flags = e.has_fraction ? BatchRecord::HasFraction : 0;
  r.addr = run_.settings.size();
  run_.settings.push_back(BatchSettingsText{std::string(e.api), std::string(e.label), e.fraction});
  run_.records.push_back(r);
}

void BatchRunRecorder::on_event(const Event& e) {
  ++position_;
  if (e.op == Op::Mark) {
    if (std::optional<uint64_t> batch = batch_in_mark(e.label)) {
      if (run_.marked_batch && *run_.marked_batch != *batch && run_.mark_conflict.empty()) {
        run_.mark_conflict = "marks say batch " + std::to_string(*run_.marked_batch) + " and batch " + std::to_string(*batch);
      }
      if (!run_.marked_batch) run_.marked_batch = batch;
    }
    return;
  }
  if ((e.op == Op::ScopeBegin || e.op == Op::ScopeEnd) && e.api == kBackwardScopeApi) {
    if (e.op == Op::ScopeBegin) roles_.on_backward_begin();
    if (autograd_.on_backward_scope(e)) roles_.on_backward_end();
    return;
  }
  const bool torch = is_torch(e.api);
  if (!replay_reads(e, torch)) return;
  const BatchRecord::Api api = torch ? torch_api(e.api) : BatchRecord::Runtime;
  keep(e, api);
  if (!torch || e.initial) return;
  if ((e.op == Op::BlockAlloc && api == BatchRecord::TorchAlloc) || (e.op == Op::BlockOom && api == BatchRecord::TorchOom)) {
    on_request(e);
  } else if (e.op == Op::BlockFree) {
    on_block_free(e);
  }
}

uint32_t BatchRunRecorder::site_index(SiteId site, int32_t device, uint64_t* key) {
  const uint64_t id = site ^ (static_cast<uint64_t>(static_cast<uint32_t>(device)) << 40);
  auto found = site_of_.find(id);
  if (found != site_of_.end()) {
    *key = site_keys_[found->second];
    return found->second;
  }
  Stack frames = resolve_site(symbols_, site);
  KeyHash hash;
  hash.add(static_cast<uint64_t>(static_cast<uint32_t>(device)));
  for (const LogicalFrame& f : frames) {
    hash.add(f.function);
    hash.add(f.file);
    hash.add(static_cast<uint64_t>(f.line) << 2 | (f.python ? 1 : 0) | (f.inlined ? 2 : 0));
    if (f.function.empty()) {  // a frame without a symbol: where it lies in its module
      hash.add(basename(f.module));
      hash.add(f.offset);
    }
  }
  const uint32_t index = static_cast<uint32_t>(run_.sites.size());
  run_.sites.push_back(std::move(frames));
  site_keys_.push_back(hash.h);
  site_of_.emplace(id, index);
  *key = hash.h;
  return index;
}

void BatchRunRecorder::on_request(const Event& e) {
  const SiteId site = autograd_.site_for(e);
  BatchRequest request;
  request.size = e.size;
  request.record = static_cast<uint32_t>(run_.records.size() - 1);
  request.site = site_index(site, e.device, &request.key);
  if (e.op == Op::BlockOom) {  // refused: never live; its role is its site's
    ++run_.recorded_ooms;
  }
  Holding h;
  h.level = Level::Block;
  h.device = e.device;
  h.key = e.addr;
  h.size = e.size;
  h.site = site;
  h.position = position_;
  h.torch = true;
  h.time_ns = e.t;
  h.addr = e.addr;
  roles_.set_time(e.t);
  roles_.on_acquire(h);
  request.role = roles_.role_of(h);
  const uint32_t index = static_cast<uint32_t>(run_.requests.size());
  run_.requests.push_back(request);
  if (e.op == Op::BlockOom) {
    roles_.on_release(h);
    return;
  }
  const uint64_t key = e.addr ^ (static_cast<uint64_t>(static_cast<uint32_t>(e.device)) << 56);
  auto [it, inserted] = live_.try_emplace(key, Live{index, h});
  if (!inserted) {  // a free was not recorded: the old block is gone
    roles_.on_release(it->second.holding);
    it->second = Live{index, h};
  }
}

void BatchRunRecorder::on_block_free(const Event& e) {
  const uint64_t key = e.addr ^ (static_cast<uint64_t>(static_cast<uint32_t>(e.device)) << 56);
  auto it = live_.find(key);
  if (it == live_.end()) return;
  // Its role now: a block allocated inside backward() is a gradient once the outermost backward()
  // returned with it live, a temporary when freed before.
  run_.requests[it->second.request].role = roles_.role_of(it->second.holding);
  roles_.on_release(it->second.holding);
  live_.erase(it);
}

BatchRun BatchRunRecorder::finish() {
  for (const auto& [key, live] : live_) run_.requests[live.request].role = roles_.role_of(live.holding);
  live_.clear();
  return std::move(run_);
}

BatchRun read_batch_run(const std::string& path, const std::string& name) {
  std::unique_ptr<ByteSource> source;
  try {
    source = open_trace_source(path);
  } catch (const TraceError& error) {
    throw TraceError(name, error.line(), error.message());
  }
  SymbolTable symbols;
  BatchRunRecorder recorder(symbols, name);
  read_trace(*source, name, symbols, recorder);
  return recorder.finish();
}

}  // namespace gpumemtrace::report
