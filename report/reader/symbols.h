// report/reader/symbols.h — the modules, frames and stacks of one trace, interned as they are read.
//
// Memory grows with the number of unique frames and stacks, never with the number of events.
// Invariant: every id stored here was defined on an earlier line (the reader checks it), so
// resolve() never meets a dangling id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/reader/ids.h"

namespace gpumemtrace::report {

// One logical frame: a real frame or one of the functions inlined into it.
struct LogicalFrame {
  std::string function;
  std::string file;      // "" when unknown
  uint32_t line = 0;     // 0 when unknown
  std::string module;    // module path, "" when unknown (and for Python frames)
  bool python = false;
  bool inlined = false;  // an inlined function, not the real frame at this ip
  uint64_t ip = 0;       // the instruction address, 0 when unknown (Python frames, snapshots)
  uint64_t offset = 0;   // ip - the module's load bias, 0 when unknown
};

using Stack = std::vector<LogicalFrame>;

class SymbolTable {
 public:
  struct InlinedCall {
    std::string function;
    std::string file;
    uint32_t line = 0;
  };
  struct Frame {
    std::string function;
    std::string file;
    uint32_t line = 0;
    ModuleId module;      // none: no module
    uint64_t ip = 0;      // 0 = unknown
    uint64_t offset = 0;  // 0 = unknown (no module)
    bool python = false;
    std::vector<InlinedCall> inlined;  // innermost first
  };

  // A module defined again replaces the path it had.
  void add_module(ModuleId id, std::string path);
  bool has_module(ModuleId id) const { return modules_.count(id) != 0; }
  // Returns false when the id is already taken (a trace defines each frame once).
  bool add_frame(FrameId id, Frame frame);
  bool has_frame(FrameId id) const { return frames_.count(id) != 0; }
  bool add_stack(StackId id, std::vector<FrameId> frame_ids) {
    return stacks_.emplace(id, std::move(frame_ids)).second;
  }
  bool has_stack(StackId id) const { return !id || stacks_.count(id) != 0; }

  // What the table holds, for the reader's limits (trace_reader.h): definitions, and the bytes of
  // the names kept (module paths, frames' function and file names, inlined calls' too).
  size_t modules() const { return modules_.size(); }
  size_t frames() const { return frames_.size(); }
  size_t stacks() const { return stacks_.size(); }
  uint64_t text_bytes() const { return text_bytes_; }

  // What a stack of these (defined) frames resolves to: its logical frames (inlined calls expanded)
  // and the bytes of their names (function, file and module path each), as resolve() copies them.
  struct Extent {
    uint64_t frames = 0;
    uint64_t text_bytes = 0;
  };
  Extent extent(const std::vector<FrameId>& frame_ids) const;

  // The stack's logical frames, innermost first, inlined functions expanded before the frame
  // that contains them. The none stack resolves to an empty stack.
  Stack resolve(StackId stack_id) const;

 private:
  std::unordered_map<ModuleId, std::string> modules_;
  std::unordered_map<FrameId, Frame> frames_;
  std::unordered_map<StackId, std::vector<FrameId>> stacks_;
  uint64_t text_bytes_ = 0;
};

}  // namespace gpumemtrace::report
