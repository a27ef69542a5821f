// interpose/writer/modules.h — the loaded ELF objects (path, load bias, extent, build-id), so frames
// can be attributed to a module and re-symbolized offline. Writer thread only (not thread-safe).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpumemtrace {

struct Module {
  uint32_t id = 0;
  std::string path;
  uintptr_t base = 0;  // load bias (dlpi_addr)
  uintptr_t lo = 0;    // lowest mapped address of its PT_LOAD segments
  uintptr_t hi = 0;    // one past the highest
  std::string build_id;  // hex
};

class ModuleMap {
 public:
  // Rescans the loaded objects if anything was loaded or unloaded since the last scan (the loader's
  // dlpi_adds/dlpi_subs counters tell, so an unchanged process costs one callback).
  // Appends the ids of the modules seen for the first time to `added`.
  void refresh(std::vector<uint32_t>* added);
  const Module& by_id(uint32_t id) const { return modules_[id - 1]; }
  // The module containing `ip`, or null.
  const Module* find(uintptr_t ip) const;

 private:
  std::vector<Module> modules_;          // every module ever seen (ids are stable), in id order
  std::vector<const Module*> by_address_;  // currently loaded, sorted by lo
  unsigned long long adds_ = 0, subs_ = 0;
  bool scanned_ = false;
};

}  // namespace gpumemtrace
