// report/analyses/live_model.h — what a running process holds now, from its trace as it is read:
// for gpumemtrace top (tools/top.cpp), which reads the trace while it grows and shows a LiveState
// each second.
//
// A TraceHandler over the shared replayed memory model (memory_model.h): live bytes per device at
// both levels (CUDA allocations and caching-allocator blocks) and per call site, the OOMs (failed
// requests: is_out_of_memory), how far the trace has come, and whether it has ended. A pure function
// of the events it is given: no I/O, no clock. Each site's stack is resolved when the site first
// holds memory (its definitions come before that), so that state() needs the symbol table no more.
// Memory: the model's, and one resolved stack per site that ever held memory.
// Not thread-safe: the caller serializes the handler's calls and state() (tools/top.cpp: one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/memory_model.h"
#include "report/analyses/site.h"
#include "report/reader/trace_reader.h"

namespace gpumemtrace::report {

struct LiveSite {
  int32_t device = -1;
  Level level = Level::Allocation;  // Allocation (CUDA level, physical chunks included) or Block
  SiteId site = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::shared_ptr<const Stack> stack;  // innermost first; shared, never changed
};

struct LiveDevice {
  int32_t device = -1;
  std::string name;          // "" when the trace has no device record for it
  uint64_t total = 0;        // 0: unknown
  uint64_t reserved = 0;     // live at the CUDA level
  uint64_t allocated = 0;    // live in caching-allocator blocks
  uint64_t peak_reserved = 0;
  bool has_blocks = false;   // block-level data (PyTorch, a custom allocator)
  uint64_t ooms = 0;         // failed requests, as the report counts its OOM incidents
};

struct LiveState {
  bool started = false;      // the header was read
  Header header;
  bool ended = false;        // the footer was read
  Footer footer;
  uint64_t events = 0;
  uint64_t first_time_ns = 0;  // of the first and the last event read
  uint64_t last_time_ns = 0;
  uint64_t ooms = 0;           // the devices' together
  uint64_t dropped = 0;      // events the recorder lost (the figures may be off)
  bool capped = false;       // the trace reached its size cap: the figures stopped there
  bool paused = false;       // stacks are paused (gpumemtrace.stop()) as of the last record read
  std::vector<LiveDevice> devices;  // by device
  std::vector<LiveSite> sites;      // every site holding memory now, in no order
};

class LiveModel : public TraceHandler {
 public:
  // `symbols`: the table the reader fills as it goes (read_trace).
  explicit LiveModel(const SymbolTable& symbols) : symbols_(symbols) {}

  void on_header(const Header& header) override;
  void on_device(const DeviceInfo& info) override;
  void on_event(const Event& e) override;
  void on_dropped(uint64_t count) override { state_.dropped += count; }
  void on_footer(const Footer& footer) override;
  void on_capped(const Capped&) override { state_.capped = true; }
  void on_pause(const Event& e) override { state_.paused = e.op == Op::Pause; }

  // Now: a copy (the stacks shared).
  LiveState state() const;

 private:
  const SymbolTable& symbols_;
  MemoryModel model_;
  LiveState state_;  // all but devices, sites and the OOM total, which come from the model and device_ooms_
  std::map<int32_t, DeviceInfo> device_info_;
  std::map<int32_t, uint64_t> device_ooms_;
  std::unordered_map<SiteId, std::shared_ptr<const Stack>> stacks_;
};

}  // namespace gpumemtrace::report
