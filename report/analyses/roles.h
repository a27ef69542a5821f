// report/analyses/roles.h — what live memory is for: parameters, gradients, optimizer state,
// activations, backward temporaries, library workspaces, allocator cache, other.
//
// A block's role is decided when it is allocated, from its site's frames (Python first, their paths
// with either separator; docs/report.md, "Memory by role", is the table):
//  - parameters: under Module.to/cuda/_apply/load_state_dict, nn.Parameter, torch.load, or a
//    module's __init__/reset_parameters (created on the device);
//  - optimizer state: under torch/optim/ (Optimizer.step: state on first touch, and its step
//    temporaries);
//  - activations: under a forward() (Module._call_impl) and not one of the above;
//  - gradients / backward temporaries: allocated inside a backward() call (on the autograd
//    engine's threads, autograd_attribution.h, or under backward frames, or under the engine's
//    native frames without a Python frame): those still live when the outermost backward()
//    returns are gradients, those freed before are temporaries. A trace without backward() scopes
//    (a PyTorch snapshot) shows no return: there a backward() opens with a block allocated under
//    backward frames and returns when a block of another role is allocated (the program went on:
//    the optimizer, the next forward pass); frameless blocks in between are its;
//  - other: everything else (inputs the program made itself, custom allocators' blocks).
// CUDA-level memory outside blocks: library workspaces (a `held:` rule matches), a caching
// allocator's segments (the part not handed out is the allocator cache), or other.
//
// The split is taken at each new block-level peak of a device (its reserved peak when it has no
// block data) and on demand (each OOM incident). A peak inside a backward() is settled when that
// backward() returns: its pending blocks become gradients or temporaries then.
//
// Memory: one entry per live block and per distinct site; nothing per event. Single-threaded.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "report/analyses/device_table.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/node_pool.h"
#include "report/analyses/suppressions.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

// True when frame `f` is the function `name`, as PyTorch records it (co_name: "forward") or as the
// recorder reads live frames (co_qualname: "Net.forward", "Module._call_impl").
bool function_is(const LogicalFrame& f, std::string_view name);

// True when a CUDA-level allocation with this stack is a caching allocator taking a segment or a
// chunk (PyTorch's CUDACachingAllocator / ExpandableSegment).
bool is_allocator_segment_stack(const Stack& stack);

class Roles : public ModelListener {
 public:
  Roles(const SymbolTable& symbols, const Suppressions& suppressions)
      : symbols_(symbols), suppressions_(suppressions) {}

  void on_acquire(const Holding& h) override;
  // The role a block allocated at `site` gets if allocated now (before it is applied: passes.h).
  Role role_of_new_block(SiteId site);
  void on_release(const Holding& h) override;
  // A backward() call opened (any depth) / the outermost one returned: its pending blocks are
  // settled.
  void on_backward_begin() { in_backward_ = true; }
  void on_backward_end();

  // The role of a live holding: a block's as split() counts it now, a CUDA-level holding's by its
  // class (library workspace, caching allocator segment, other). Other when it is not live here.
  Role role_of(const Holding& h) const;
  // Live memory of `device` by role now.
  RoleSplit split(int32_t device) const;
  // At the device's peak (see above); false when it never held memory.
  bool peak(int32_t device, RoleSplit* split, uint64_t* time_ns) const;
  // Record the time of the event being applied (for the peak's timestamp).
  void set_time(uint64_t time_ns) { time_ns_ = time_ns; }
  // A capped trace's events ended (MemoryModel::end_history): the live set applied after it has no
  // time, and moves no peak.
  void end_history() { history_ended_ = true; }

 private:
  enum class Raw : uint8_t { Library, Segment, Other };
  struct Pending {
    uint64_t key;
    uint64_t position;
  };
  struct DeviceRoles {
    uint64_t blocks[kRoles] = {};     // live block bytes by role
    uint64_t block_live = 0;
    uint64_t raw[3] = {};             // live CUDA-level bytes by Raw class
    uint64_t raw_live = 0;
    bool has_blocks = false;
    uint64_t peak_live = 0;           // block_live (raw_live without blocks) at the peak
    RoleSplit peak;
    uint64_t peak_time_ns = 0;
    uint64_t peak_position = 0;
    bool peak_in_backward = false;    // taken while a backward() was open: not settled yet
  };
  struct LiveBlock {
    Role role;
    int32_t device;
    uint64_t position;
    uint64_t size;
    bool pending;                     // allocated inside the open backward()
  };

  Role block_role(SiteId site);
  Raw raw_class(const Holding& h);
  DeviceRoles& device(int32_t device) { return devices_.get(device); }
  void maybe_peak(int32_t device, const Holding& h);

  const SymbolTable& symbols_;
  const Suppressions& suppressions_;
  std::unordered_map<SiteId, Role> block_roles_;  // per site
  std::unordered_map<SiteId, bool> backward_sites_;
  std::unordered_map<StackId, Raw> raw_classes_;  // per stack
  // The last stack looked up in raw_classes_ and its class: allocations come from a few sites in a row.
  bool last_raw_known_ = false;
  StackId last_raw_stack_;
  Raw last_raw_ = Raw::Other;
  // One entry per live holding, added and removed on nearly every event: nodes from a pool.
  NodePool nodes_;  // before the maps it serves
  std::pmr::unordered_map<uint64_t, LiveBlock> live_blocks_{&nodes_};
  std::pmr::unordered_map<uint64_t, Raw> live_raw_{&nodes_};  // key: handle or address (levels never share keys)
  std::vector<Pending> pending_;                // blocks allocated inside the open backward()
  DeviceTable<DeviceRoles> devices_;
  uint64_t time_ns_ = 0;
  bool in_backward_ = false;        // a backward() scope is open
  bool inferred_backward_ = false;  // a backward() without a scope is open (roles.h)
  bool backward_open() const { return in_backward_ || inferred_backward_; }
  bool history_ended_ = false;
};

}  // namespace gpumemtrace::report
