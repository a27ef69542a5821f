// report/analyses/roles.cpp — live memory by role (rules in roles.h and docs/report.md).
#include "report/analyses/roles.h"

#include <algorithm>

namespace gpumemtrace::report {
namespace {

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

bool is_parameter_frame(const LogicalFrame& f) {
  if (contains(f.file, "torch/nn/parameter.py") || contains(f.file, "torch/serialization.py")) return true;
  if (contains(f.file, "torch/nn/modules/")) {
    static const char* const kNames[] = {"_apply", "to", "cuda", "to_empty", "load_state_dict",
                                         "_load_from_state_dict", "__init__", "reset_parameters"};
    for (const char* name : kNames) {
      if (function_is(f, name)) return true;
    }
  }
  return false;
}

bool is_backward_frame(const LogicalFrame& f) {
  return (function_is(f, "backward") && contains(f.file, "torch/_tensor.py")) ||
         (contains(f.file, "torch/autograd/") && (function_is(f, "backward") || function_is(f, "grad")));
}

// A native frame of PyTorch's autograd engine (Engine::thread_main, Engine::evaluate_function, ...). Its
// worker threads run Python-free: a block whose stack has such a frame and no Python frame was
// allocated by a backward() (a snapshot recorded with stacks="all" gives these frames, and no backward()
// scope).
bool is_autograd_engine_frame(const LogicalFrame& f) {
  return !f.python && contains(f.function, "torch::autograd::Engine::");
}

// Keys of raw (CUDA-level) holdings: a physical handle and an address never collide.
uint64_t raw_key(const Holding& h) { return h.level == Level::Physical ? h.key ^ (1ull << 63) : h.key; }

}  // namespace

bool function_is(const LogicalFrame& f, std::string_view name) {
  const std::string_view function = f.function;
  if (function.size() < name.size() || function.substr(function.size() - name.size()) != name) return false;
  return function.size() == name.size() || function[function.size() - name.size() - 1] == '.';
}

bool is_allocator_segment_stack(const Stack& stack) {
  for (const LogicalFrame& f : stack) {
    if (contains(f.function, "CUDACachingAllocator") || contains(f.function, "ExpandableSegment")) return true;
  }
  return false;
}

Role Roles::block_role(SiteId site) {
  auto cached = block_roles_.find(site);
  if (cached != block_roles_.end()) return cached->second;
  Role role = Role::Other;
  const Attribution attribution = site_attribution(site);
  bool backward = attribution == Attribution::Backward || attribution == Attribution::NoFrames;
  if (!backward) {
    // The innermost telling frame decides: a parameter created inside forward() (lazy modules)
    // is a parameter, an activation made inside the optimizer's step is optimizer state. Without a
    // telling Python frame, the autograd engine's native frames tell a backward().
    bool python = false, engine = false;
    for (LogicalFrame& f : symbols_.resolve(site_stack(site))) {
      if (!f.python) {
        engine = engine || is_autograd_engine_frame(f);
        continue;
      }
      python = true;
      std::replace(f.file.begin(), f.file.end(), '\\', '/');  // a Windows path: D:\...\torch\optim\adamw.py
      if (is_parameter_frame(f)) { role = Role::Parameters; break; }
      if (contains(f.file, "torch/optim/")) { role = Role::OptimizerState; break; }
      if (is_backward_frame(f)) { backward = true; break; }
      if (function_is(f, "forward") || function_is(f, "_call_impl")) { role = Role::Activations; break; }
    }
    backward = backward || (engine && !python);
  }
  if (backward) role = Role::BackwardTemporaries;  // until its backward() returns (on_backward_end)
  backward_sites_[site] = backward;
  block_roles_.emplace(site, role);
  return role;
}

Roles::Raw Roles::raw_class(const Holding& h) {
  if (h.torch) return Raw::Segment;
  const StackId stack = site_stack(h.site);
  if (last_raw_known_ && last_raw_stack_ == stack) return last_raw_;
  auto cached = raw_classes_.find(stack);
  if (cached != raw_classes_.end()) {
    last_raw_known_ = true;
    last_raw_stack_ = stack;
    last_raw_ = cached->second;
    return last_raw_;
  }
  const Stack frames = symbols_.resolve(stack);
  Raw raw = Raw::Other;
  if (suppressions_.match_library(frames)) raw = Raw::Library;
  else if (is_allocator_segment_stack(frames)) raw = Raw::Segment;
  raw_classes_.emplace(stack, raw);
  return raw;
}

Role Roles::role_of_new_block(SiteId site) {
  const Role role = block_role(site);
  // Frameless blocks with no backward() open to charge them to: their role is unknown.
  const bool pending = backward_open() && backward_sites_[site];
  return role == Role::BackwardTemporaries && !pending && site_attribution(site) == Attribution::NoFrames ? Role::Other
                                                                                                          : role;
}

void Roles::on_acquire(const Holding& h) {
  if (h.level == Level::Host) return;  // pinned host memory: no device's
  DeviceRoles& d = device(h.device);
  if (h.level == Level::Block) {
    const Role role = role_of_new_block(h.site);
    // Without a backward() scope (a snapshot's history): a block of backward frames opens one, and a
    // block of another role closes it (the backward() returned: the program allocates outside it again).
    if (!in_backward_) {
      if (role == Role::BackwardTemporaries) inferred_backward_ = true;
      else if (inferred_backward_) on_backward_end();
    }
    const bool pending = backward_open() && backward_sites_[h.site];
    if (!d.has_blocks) d.peak_live = 0;  // from now on the device's peak is its block-level peak
    d.has_blocks = true;
    d.blocks[static_cast<size_t>(role)] += h.size;
    d.block_live += h.size;
    live_blocks_[h.key] = LiveBlock{role, h.device, h.position, h.size, pending};
    if (pending) pending_.push_back(Pending{h.key, h.position});
  } else {
    Raw raw = raw_class(h);
    d.raw[static_cast<size_t>(raw)] += h.size;
    d.raw_live += h.size;
    live_raw_[raw_key(h)] = raw;
  }
  maybe_peak(h.device, h);
}

void Roles::on_release(const Holding& h) {
  if (h.level == Level::Host) return;
  DeviceRoles& d = device(h.device);
  if (h.level == Level::Block) {
    auto it = live_blocks_.find(h.key);
    if (it == live_blocks_.end()) return;
    uint64_t& bytes = d.blocks[static_cast<size_t>(it->second.role)];
    bytes -= std::min(bytes, h.size);
    d.block_live -= std::min(d.block_live, h.size);
    live_blocks_.erase(it);
    return;
  }
  auto it = live_raw_.find(raw_key(h));
  if (it == live_raw_.end()) return;
  uint64_t& bytes = d.raw[static_cast<size_t>(it->second)];
  bytes -= std::min(bytes, h.size);
  d.raw_live -= std::min(d.raw_live, h.size);
  live_raw_.erase(it);
}

// A new peak copies the split (O(roles)); a run of increases costs one copy each, which is cheap.
void Roles::maybe_peak(int32_t device_id, const Holding& h) {
  DeviceRoles& d = device(device_id);
  const uint64_t live = d.has_blocks ? d.block_live : d.raw_live;
  if (live <= d.peak_live || history_ended_) return;
  d.peak_live = live;
  d.peak = split(device_id);
  d.peak_time_ns = time_ns_;
  d.peak_position = h.position;
  d.peak_in_backward = backward_open();
}

void Roles::on_backward_end() {
  in_backward_ = false;
  inferred_backward_ = false;
  for (const Pending& p : pending_) {
    auto it = live_blocks_.find(p.key);
    if (it == live_blocks_.end() || it->second.position != p.position || !it->second.pending) continue;
    LiveBlock& block = it->second;  // allocated inside the backward() and still live: a gradient
    block.pending = false;
    if (block.role != Role::BackwardTemporaries) continue;
    block.role = Role::Gradients;
    DeviceRoles& d = device(block.device);
    auto move = [&](uint64_t* bytes) {
      const uint64_t moved = std::min(bytes[static_cast<size_t>(Role::BackwardTemporaries)], block.size);
      bytes[static_cast<size_t>(Role::BackwardTemporaries)] -= moved;
      bytes[static_cast<size_t>(Role::Gradients)] += moved;
    };
    move(d.blocks);
    if (d.peak_in_backward && p.position <= d.peak_position) move(d.peak.bytes);
  }
  for (auto& [id, d] : devices_) d.peak_in_backward = false;
  pending_.clear();
}

Role Roles::role_of(const Holding& h) const {
  if (h.level == Level::Block) {
    auto it = live_blocks_.find(h.key);
    return it == live_blocks_.end() ? Role::Other : it->second.role;
  }
  auto it = live_raw_.find(raw_key(h));
  if (it == live_raw_.end()) return Role::Other;
  switch (it->second) {
    case Raw::Library: return Role::LibraryWorkspaces;
    case Raw::Segment: return Role::AllocatorCache;
    case Raw::Other: return Role::Other;
  }
  return Role::Other;
}

RoleSplit Roles::split(int32_t device_id) const {
  RoleSplit out;
  const DeviceRoles* found = devices_.find(device_id);
  if (!found) return out;
  const DeviceRoles& d = *found;
  for (size_t i = 0; i < kRoles; ++i) out.bytes[i] = d.blocks[i];
  const uint64_t library = d.raw[static_cast<size_t>(Raw::Library)];
  const uint64_t segments = d.raw[static_cast<size_t>(Raw::Segment)];
  out.bytes[static_cast<size_t>(Role::LibraryWorkspaces)] += library;
  // The rest of the reserved bytes: the caching allocator's unused part of its segments, then other.
  const uint64_t accounted = d.block_live + library;
  const uint64_t rest = d.raw_live > accounted ? d.raw_live - accounted : 0;
  const uint64_t cache = std::min(rest, segments > d.block_live ? segments - d.block_live : 0);
  out.bytes[static_cast<size_t>(Role::AllocatorCache)] += cache;
  out.bytes[static_cast<size_t>(Role::Other)] += rest - cache;
  return out;
}

bool Roles::peak(int32_t device_id, RoleSplit* out, uint64_t* time_ns) const {
  const DeviceRoles* d = devices_.find(device_id);
  if (!d || d->peak_live == 0) return false;
  *out = d->peak;
  *time_ns = d->peak_time_ns;
  return true;
}

}  // namespace gpumemtrace::report
