// report/reader/offline_symbolizer.h — names the native frames of a trace recorded without symbols
// (GPUMEMTRACE_SYMBOLIZE=0: frames with ip, module and offset but no function) from the module
// records' paths and build ids, the way the recorder would have: function, file:line and inlined
// calls, with the same code (trace/dwarf_symbols.h).
//
// A module's file is opened once, on the first frame that needs it, and used only when its build id
// is the one the trace recorded. A module whose file is gone, unreadable or different is never used;
// warnings() names it once, and its frames keep module+offset. Frames are defined once per trace,
// so there is no per-frame cache. Memory: one libdwfl session (the file's ELF and DWARF, one or two
// file descriptors) per module file that frames referred to, released with the instance: module
// records naming the same path and build id share one (a trace naming libc.so.6 under 200 ids
// loaded its debug information 200 times: 31 s and 3.2 GB), and at most kMaxModuleFiles files are
// opened per trace (the others' frames keep module+offset, with their warning).
// Not thread-safe: one instance per trace being read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

// A process maps a few hundred libraries at most, and its stacks pass through far fewer.
inline constexpr size_t kMaxModuleFiles = 128;

class OfflineSymbolizer {
 public:
  OfflineSymbolizer();
  ~OfflineSymbolizer();
  OfflineSymbolizer(const OfflineSymbolizer&) = delete;
  OfflineSymbolizer& operator=(const OfflineSymbolizer&) = delete;

  // A module record: `build_id` in hex as the trace has it ("" when the recorder did not know it).
  void add_module(ModuleId id, std::string_view path, std::string_view build_id);
  // A frame without symbols needs them: native, of a known module, with an offset, and the trace
  // gave no "function" (a frame written with "function":"" was looked up by the recorder already).
  static bool needs_symbols(const SymbolTable::Frame& frame, bool has_function);
  // Fills the frame's function, file, line and inlined calls from its module's file. Returns false
  // when the module cannot be used (the frame is left as it is).
  bool symbolize(SymbolTable::Frame& frame);

  // One line per module that could not be used, with the number of frames it left unnamed.
  std::vector<std::string> warnings() const;
  uint64_t frames_symbolized() const { return frames_symbolized_; }

 private:
  struct File;
  struct Module;
  Module* usable(ModuleId id);

  std::unordered_map<ModuleId, std::unique_ptr<Module>> modules_;
  // The files opened, by path and build id: each once, however many module records name it.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<File>> files_;
  std::vector<ModuleId> failed_;  // module ids in the order they failed: warnings in trace order
  uint64_t frames_symbolized_ = 0;
};

}  // namespace gpumemtrace::report
