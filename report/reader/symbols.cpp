// report/reader/symbols.cpp — resolving a stack id to its logical frames (inlined calls expanded).
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

Stack SymbolTable::resolve(StackId stack_id) const {
  Stack out;
  auto stack = stacks_.find(stack_id);
  if (stack == stacks_.end()) return out;
  for (FrameId frame_id : stack->second) {
    auto frame = frames_.find(frame_id);
    if (frame == frames_.end()) continue;
    const Frame& f = frame->second;
    std::string module;
    if (auto m = modules_.find(f.module); m != modules_.end()) module = m->second;
    // The writer lists inlined functions innermost first and gives the real function last, so the
    // logical order (innermost first) is the inlined list followed by the frame itself.
    for (const InlinedCall& call : f.inlined) {
      out.push_back(LogicalFrame{call.function, call.file, call.line, module, f.python, true, f.ip, f.offset});
    }
    out.push_back(LogicalFrame{f.function, f.file, f.line, module, f.python, false, f.ip, f.offset});
  }
  return out;
}

}  // namespace gpumemtrace::report
