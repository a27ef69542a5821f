// report/analyses/oom_incidents.cpp — failed allocations -> OOM incidents and failed calls.
#include "report/analyses/oom_incidents.h"

#include <algorithm>
#include <cstdio>

#include "report/outputs/units.h"

namespace gpumemtrace::report {
namespace {

constexpr int64_t kOutOfMemory = 2;  // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY

bool is_driver_api(std::string_view api) {
  return api.size() > 2 && api.compare(0, 2, "cu") == 0 && api.compare(0, 4, "cuda") != 0;
}

constexpr uint64_t kMiB = 1ull << 20;

// PyTorch's DeviceCachingAllocator::get_allocation_size: what alloc_block asks cudaMalloc for.
uint64_t torch_allocation_size(uint64_t size) {
  if (size <= kMiB) return 2 * kMiB;                 // kSmallBuffer
  if (size < 10 * kMiB) return 20 * kMiB;            // kLargeBuffer
  return (size + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);  // kRoundLarge
}

}  // namespace

std::string cap_text(double fraction, uint64_t bytes, const std::string& source) {
  if (!(fraction > 0)) return "";
  char number[32];
  std::snprintf(number, sizeof number, "%g", fraction);
  std::string text = source == "per_process_memory_fraction"
                         ? "the option per_process_memory_fraction:" + std::string(number)
                         : "set_per_process_memory_fraction(" + std::string(number) + ")";
  if (bytes) text += ", " + format_bytes(bytes) + " of this device";
  return text;
}

bool is_out_of_memory(const Event& e) {
  return e.op == Op::BlockOom || (e.op == Op::Alloc && e.result == kOutOfMemory);
}

bool same_request_size(uint64_t request, uint64_t attempt, bool physical) {
  if (attempt == request || attempt == torch_allocation_size(request)) return true;
  return physical && (attempt == 2 * kMiB || attempt == 20 * kMiB);  // expandable segments' pages
}

const char* cuda_error_name(std::string_view api, int64_t result) {
  const bool driver = is_driver_api(api);
  switch (result) {
    case 0: return driver ? "CUDA_SUCCESS" : "cudaSuccess";
    case 1: return driver ? "CUDA_ERROR_INVALID_VALUE" : "cudaErrorInvalidValue";
    case 2: return driver ? "CUDA_ERROR_OUT_OF_MEMORY" : "cudaErrorMemoryAllocation";
    case 3: return driver ? "CUDA_ERROR_NOT_INITIALIZED" : "cudaErrorInitializationError";
    case 4: return driver ? "CUDA_ERROR_DEINITIALIZED" : "cudaErrorCudartUnloading";
    // 34-35: a machine without a GPU driver (the toolkit's stub libcuda, or none at all).
    case 34: return driver ? "CUDA_ERROR_STUB_LIBRARY" : "cudaErrorStubLibrary";
    case 35: return driver ? "unknown error" : "cudaErrorInsufficientDriver";
    case 100: return driver ? "CUDA_ERROR_NO_DEVICE" : "cudaErrorNoDevice";
    case 101: return driver ? "CUDA_ERROR_INVALID_DEVICE" : "cudaErrorInvalidDevice";
    case 201: return driver ? "CUDA_ERROR_INVALID_CONTEXT" : "cudaErrorDeviceUninitialized";
    case 400: return driver ? "CUDA_ERROR_INVALID_HANDLE" : "cudaErrorInvalidResourceHandle";
    case 700: return driver ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "cudaErrorIllegalAddress";
    case 800: return driver ? "CUDA_ERROR_NOT_PERMITTED" : "cudaErrorNotPermitted";
    case 801: return driver ? "CUDA_ERROR_NOT_SUPPORTED" : "cudaErrorNotSupported";
    default: return "unknown error";
  }
}

uint64_t usable_free(const OomFigures& f) {
  if (!f.has_device_free) return 0;
  // What this process reserved since the reading came out of the device's free bytes; what it
  // released went back to them.
  int64_t free = static_cast<int64_t>(f.device_free);
  if (f.reading_reserved) free += static_cast<int64_t>(*f.reading_reserved) - static_cast<int64_t>(f.ours);
  uint64_t corrected = free > 0 ? static_cast<uint64_t>(free) : 0;
  if (f.device_total) corrected = std::min(corrected, f.device_total - std::min(f.device_total, f.ours));
  return corrected;
}

std::optional<AddressGaps> measure_address_gaps(const MemoryModel& model, int32_t device) {
  AddressGaps gaps;
  uint64_t start = 0, end = 0, live = 0;
  bool any = false;
  for (const auto& [addr, a] : model.allocations()) {  // in address order
    if (a.device != device) continue;
    if (a.kind != Kind::Device || a.has_blocks || a.torch) return std::nullopt;  // not one plain heap
    if (!any) start = end = addr;
    any = true;
    if (addr > end) gaps.largest = std::max(gaps.largest, addr - end);
    end = std::max(end, addr + a.size);
    live += a.size;
  }
  if (!any) return std::nullopt;
  for (const auto& [handle, a] : model.physical()) {
    if (a.device == device) return std::nullopt;
  }
  gaps.span = end - start;
  gaps.inside = gaps.span > live ? gaps.span - live : 0;  // overlapping ranges (a malformed trace) count once
  return gaps;
}

Verdict oom_verdict(const OomFigures& f, std::string* explanation) {
  const uint64_t free = usable_free(f);
  const uint64_t free_inside = f.has_blocks ? f.fragmentation.free_in_reserved : 0;
  auto say = [&](const std::string& text) {
    if (explanation) *explanation = text;
  };
  if (f.has_device_free && f.device_total && f.device_free > f.device_total) {
    say("the trace's figures contradict each other: " + format_bytes(f.device_free) + " free of a " +
        format_bytes(f.device_total) + " device");
    return Verdict::NotEnoughInformation;
  }
  // A reading that no longer holds (taken before this process took or gave back memory) is said, with
  // the figure it gives now.
  std::string stale;
  if (f.has_device_free && free != f.device_free) {
    const uint64_t then = f.reading_reserved.value_or(f.ours);
    stale = " (the device's last reading, " + format_bytes(f.device_free) + " free, " +
            (then != f.ours ? "was taken while this process held " + format_bytes(then)
                            : "leaves no room for what this process held") +
            ")";
  }
  if (f.device_total && f.requested > f.device_total) {
    say("the request is larger than the whole device (" + format_bytes(f.device_total) + ")");
    return Verdict::Capacity;
  }
  // The recorded cap, and whether this request went past it.
  const bool past_cap = f.cap_bytes && f.ours + f.requested > f.cap_bytes;
  const std::string cap = f.cap_fraction > 0 ? "its cap, " + cap_text(f.cap_fraction, f.cap_bytes, f.cap_source) : "";
  if (f.allocator_only && !f.has_device_free && past_cap) {  // the cap alone explains it
    say("the allocator refused the request with " + format_bytes(f.ours) + " reserved: " + cap +
        ", which the request would pass");
    return Verdict::AllocatorLimit;
  }
  if (!f.has_device_free && !f.has_blocks) {
    say("no reading of the device's free memory and no allocator data in the trace");
    return Verdict::NotEnoughInformation;
  }
  if (f.allocator_only && f.has_device_free && f.requested <= free) {
    say("the device had " + format_bytes(free) + " free" + stale + ", but the allocator refused the request with " +
        format_bytes(f.ours) + " reserved: " +
        (cap.empty() ? std::string("a cap such as torch.cuda.set_per_process_memory_fraction or a pool's maximum")
                     : cap + (past_cap ? ", which the request would pass" : "")));
    return Verdict::AllocatorLimit;
  }
  if (f.requested > free + free_inside) {
    if (f.has_device_free && f.device_total) {
      const uint64_t used = f.device_total - std::min(f.device_total, free);
      const uint64_t others = used > f.ours ? used - f.ours : 0;
      if (others > f.requested && others > f.device_total / 20) {
        say("other processes hold about " + format_bytes(others) + " of the device's " +
            format_bytes(f.device_total) + "; this process " + format_bytes(f.ours));
        return Verdict::OtherProcesses;
      }
    }
    if (!f.has_device_free) {
      say("the request exceeds the free space inside the allocator's segments; the device's free "
          "memory is unknown");
      return Verdict::NotEnoughInformation;
    }
    say("this process holds " + format_bytes(f.ours) + (f.device_total ? " of " + format_bytes(f.device_total) : "") +
        "; " + format_bytes(free) + " free on the device" + stale +
        (f.has_blocks ? " and " + format_bytes(free_inside) + " inside the allocator's segments" : ""));
    return Verdict::Capacity;
  }
  // Without block data, the addresses: holes between live allocations that no request this large fits.
  // Whatever free memory lies outside their span is at most free less the holes.
  const AddressGaps& gaps = f.address_gaps;
  if (!f.has_blocks && f.has_address_gaps && f.has_device_free && f.device_total && gaps.span <= f.device_total &&
      gaps.inside <= free && f.requested > std::max(gaps.largest, free - gaps.inside)) {
    say(format_bytes(free) + " free on the device" + stale + ", but in pieces: " + format_bytes(gaps.inside) +
        " in holes between this process's live allocations, the largest " + format_bytes(gaps.largest) +
        ", and at most " + format_bytes(free - gaps.inside) + " beyond them");
    return Verdict::Fragmentation;
  }
  if (f.has_blocks && f.requested > std::max(f.fragmentation.largest_free_block, free)) {
    say(format_bytes(free + free_inside) + " free in all (" + format_bytes(free_inside) +
        " inside the allocator's segments), but the largest free block is " +
        format_bytes(f.fragmentation.largest_free_block));
    return Verdict::Fragmentation;
  }
  say("the request fits in the free memory the trace shows: a limit or a driver-side cause it cannot see");
  return Verdict::NotEnoughInformation;
}

bool OomIncidents::joins(const Open& open, const Event& e) const {
  if (e.t > open.last_time + kJoinWindowNs || open.net_raw > 0 || open.net_blocks > 0) return false;
  if (e.op != Op::BlockOom) return e.size == open.last_size;  // the thread is the key's
  // A custom pool's record: its thread made the CUDA attempt, of its chunk size (joinable() checks the
  // thread).
  return same_request_size(e.size, open.last_size, open.last_physical) ||
         (!is_torch_api(e.api) && open.last_size >= e.size);
}

OomIncidents::OpenMap::iterator OomIncidents::joinable(const Event& e) {
  if (e.op != Op::BlockOom) {
    auto it = open_.find(OpenKey{e.device, e.tid});
    return it != open_.end() && joins(it->second, e) ? it : open_.end();
  }
  auto latest = open_.end();  // of the device's open incidents, the one whose last attempt is latest
  const bool torch = is_torch_api(e.api);  // else its own thread's only
  for (auto it = open_.lower_bound(OpenKey{e.device, 0}); it != open_.end() && it->first.first == e.device; ++it) {
    if (!torch && it->first.second != e.tid) continue;
    if (joins(it->second, e) && (latest == open_.end() || it->second.last_time > latest->second.last_time)) latest = it;
  }
  return latest;
}

void OomIncidents::on_failure(const Event& e, MemoryModel& model, const Roles& roles,
                              const allocator_model::MemoryCap& cap) {
  if (!is_out_of_memory(e)) {
    Calls& calls = failed_calls_[CallKey{e.device, e.result, std::string(e.api), e.stack}];
    if (calls.count++ == 0) {
      calls.size = e.size;
      calls.first_time = e.t;
    }
    return;
  }
  auto it = joinable(e);
  size_t index = Open::kNotKept;
  if (it != open_.end()) {
    index = it->second.index;
  } else {  // a request of its own
    ++incidents_total_;
    if (incidents_.size() < kMaxIncidents) {
      index = incidents_.size();
      incidents_.emplace_back();
    }
    // A new CUDA failure supersedes its thread's open incident: that request is over.
    if (e.op != Op::BlockOom) it = open_.insert_or_assign(OpenKey{e.device, e.tid}, Open{}).first;
    if (it != open_.end()) it->second.index = index;
  }
  if (e.op == Op::BlockOom) {
    if (it != open_.end()) open_.erase(it);  // the allocator gave up: the request ends here
  } else {
    Open& open = it->second;
    open.last_time = e.t;
    open.last_size = e.size;
    open.last_physical = e.kind == Kind::Physical;
    open.net_raw = open.net_blocks = 0;
  }
  tracking_ = !open_.empty();
  if (index != Open::kNotKept) record_attempt(incidents_[index], e, model, roles, cap);
}

void OomIncidents::before_event(const Event& e, const MemoryModel& model) {
  // A failed allocation changes nothing live: the measurement waits for an event that may.
  if (gaps_pending_ != Open::kNotKept && !(e.op == Op::Alloc && e.result != 0)) measure_pending_gaps(model);
  thread_ = e.tid;
  for (auto it = open_.begin(); it != open_.end();) {  // rarely more than one
    it = e.t > it->second.last_time + kJoinWindowNs ? open_.erase(it) : std::next(it);
  }
  tracking_ = !open_.empty();
}

void OomIncidents::close_all(const MemoryModel& model) {
  if (gaps_pending_ != Open::kNotKept) measure_pending_gaps(model);
  open_.clear();
  tracking_ = false;
}

void OomIncidents::count(const Holding& h, int sign) {
  if (!tracking_ || h.level == Level::Host) return;  // pinned host memory is not the device's
  auto it = open_.find(OpenKey{h.device, thread_});
  if (it == open_.end()) return;
  (h.level == Level::Block ? it->second.net_blocks : it->second.net_raw) += sign * static_cast<int64_t>(h.size);
}

void OomIncidents::measure_pending_gaps(const MemoryModel& model) {
  Incident& incident = incidents_[gaps_pending_];
  gaps_pending_ = Open::kNotKept;
  if (gap_scan_visits_ >= kGapScanBudget) return;
  gap_scan_visits_ += model.allocations().size() + model.physical().size();
  const std::optional<AddressGaps> gaps = measure_address_gaps(model, incident.report.device);
  incident.report.has_address_gaps = gaps.has_value();
  incident.report.address_gaps = gaps.value_or(AddressGaps{});
}

// Each attempt replaces the evidence: the incident is described as of its last attempt.
void OomIncidents::record_attempt(Incident& incident, const Event& e, MemoryModel& model, const Roles& roles,
                                  const allocator_model::MemoryCap& cap) {
  OomReport& r = incident.report;
  r.cap_fraction = cap.fraction;
  r.cap_source = cap.source;
  if (r.attempts.size() < kMaxAttempts) {
    r.attempts.push_back(OomAttempt{e.seq, e.t, format::op_name(e.op), std::string(e.api), e.result, e.size});
  }
  ++r.attempts_total;
  r.last_attempt_ns = e.t;
  if (e.op != Op::BlockOom) incident.cuda_failed = true;
  // The request as the program made it: the allocator's record when there is one, else the first
  // CUDA failure.
  const bool first = r.attempts_total == 1;
  if (first || e.op == Op::BlockOom) {
    r.op = format::op_name(e.op);
    r.api = std::string(e.api);
    r.result = e.result;
    r.requested = e.size;
    r.seq = e.seq;
    r.time_ns = e.t;
    r.phase = model.phase();
    if (first || e.stack) incident.site = make_site(e.stack);
  }
  MemoryModel::DeviceState& state = model.device_state(e.device);
  r.device = e.device;
  r.live_bytes = state.reserved.live();
  r.allocated_bytes = state.allocated.live();
  r.has_blocks = state.has_blocks;
  r.fragmentation = state.has_blocks ? model.measure_fragmentation(e.device) : FragmentationPoint();
  incident.holders = (state.has_blocks ? state.allocated : state.reserved).top(5, nullptr);
  r.roles = roles.split(e.device);
  // A live PyTorch block_oom carries the device's free bytes itself (the model took it as the
  // device's reading). Else the recorder writes a meminfo right after a failed allocation; until
  // it comes, the latest one known stands in.
  r.has_device_free = state.has_meminfo;
  r.device_free = state.meminfo_free;
  r.reading_reserved = state.meminfo_reserved;
  r.device_total = state.meminfo_total ? state.meminfo_total : state.summary.total;
  const size_t index = static_cast<size_t>(&incident - incidents_.data());
  // The free ranges between live allocations, where no block data describes them: measured before
  // anything changes what is live (another incident's waits no longer; a failure changed nothing).
  if (gaps_pending_ != Open::kNotKept && gaps_pending_ != index) measure_pending_gaps(model);
  r.has_address_gaps = false;
  gaps_pending_ = state.has_blocks ? Open::kNotKept : index;
  // Only the latest attempt of a device waits: an older incident keeps the reading it has.
  incident.awaiting_meminfo = !e.has_meminfo;
  awaiting_meminfo_.erase(std::remove_if(awaiting_meminfo_.begin(), awaiting_meminfo_.end(),
                                         [&](size_t i) { return incidents_[i].report.device == e.device; }),
                          awaiting_meminfo_.end());
  if (incident.awaiting_meminfo) awaiting_meminfo_.push_back(index);
}

void OomIncidents::on_meminfo(const Event& e, const MemoryModel& model) {
  if (!e.has_meminfo) return;
  auto fill = [&](size_t index) {
    OomReport& r = incidents_[index].report;
    if (r.device != e.device) return false;
    incidents_[index].awaiting_meminfo = false;
    r.has_device_free = true;
    r.device_free = e.free;
    r.reading_reserved = model.devices().at(e.device).meminfo_reserved;
    if (e.total) r.device_total = e.total;
    return true;
  };
  awaiting_meminfo_.erase(std::remove_if(awaiting_meminfo_.begin(), awaiting_meminfo_.end(), fill),
                          awaiting_meminfo_.end());
}

void OomIncidents::finish(ProcessReport& out, const SymbolTable& symbols, const MemoryModel& model) {
  if (gaps_pending_ != Open::kNotKept) measure_pending_gaps(model);
  for (Incident& incident : incidents_) {
    OomReport r = std::move(incident.report);
    r.stack = resolve_site(symbols, incident.site);
    for (const StackCount& c : incident.holders) {
      r.top_holders.push_back(StackBytes{c.bytes, c.count, resolve_site(symbols, c.site)});
    }
    OomFigures figures;
    figures.requested = r.requested;
    figures.allocator_only = !incident.cuda_failed;
    figures.has_device_free = r.has_device_free;
    figures.device_free = r.device_free;
    figures.device_total = r.device_total;
    figures.ours = r.live_bytes;
    figures.reading_reserved = r.reading_reserved;
    figures.has_blocks = r.has_blocks;
    figures.fragmentation = r.fragmentation;
    figures.has_address_gaps = r.has_address_gaps;
    figures.address_gaps = r.address_gaps;
    // [PyTorch] setMemoryFraction: allowed_memory_maximum = fraction * the device's total
    // (cudaMemGetInfo's in 2.4-2.9, totalGlobalMem in newer releases: the same figure).
    if (r.cap_fraction > 0 && r.device_total) {
      r.cap_bytes = static_cast<uint64_t>(r.cap_fraction * static_cast<double>(r.device_total));
    }
    figures.cap_fraction = r.cap_fraction;
    figures.cap_bytes = r.cap_bytes;
    figures.cap_source = r.cap_source;
    r.verdict = oom_verdict(figures, &r.explanation);
    if (r.has_device_free) {  // the figure the verdict used, and the reading when it was stale
      const uint64_t free = usable_free(figures);
      r.stale_reading = free != r.device_free;
      r.reading_free = r.device_free;
      r.device_free = free;
    }
    out.ooms.push_back(std::move(r));
  }
  if (incidents_total_ > incidents_.size()) {
    out.warnings.push_back(std::to_string(incidents_total_) + " out-of-memory incidents; the first " +
                           std::to_string(incidents_.size()) + " are reported");
  }
  for (const auto& [key, calls] : failed_calls_) {
    FailedCall call;
    call.device = key.device;
    call.api = key.api;
    call.result = key.result;
    call.error = cuda_error_name(key.api, key.result);
    call.size = calls.size;
    call.count = calls.count;
    call.first_time_ns = calls.first_time;
    call.stack = symbols.resolve(key.stack);
    out.failed_calls.push_back(std::move(call));
  }
  std::stable_sort(out.failed_calls.begin(), out.failed_calls.end(),
                   [](const FailedCall& a, const FailedCall& b) { return a.count > b.count; });
}

}  // namespace gpumemtrace::report
