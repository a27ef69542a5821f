// report/reader/symbols.cpp — interning a trace's symbols, and resolving a stack id to its logical
// frames (inlined calls expanded).
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

namespace {
uint64_t names_of(const SymbolTable::Frame& frame) {
  uint64_t bytes = frame.function.size() + frame.file.size();
  for (const SymbolTable::InlinedCall& call : frame.inlined) bytes += call.function.size() + call.file.size();
  return bytes;
}
}  // namespace

void SymbolTable::add_module(ModuleId id, std::string path) {
  std::string& slot = modules_[id];
  text_bytes_ += path.size();
  text_bytes_ -= slot.size();
  slot = std::move(path);
}

bool SymbolTable::add_frame(FrameId id, Frame frame) {
  const uint64_t bytes = names_of(frame);
  if (!frames_.emplace(id, std::move(frame)).second) return false;
  text_bytes_ += bytes;
  return true;
}

SymbolTable::Extent SymbolTable::extent(const std::vector<FrameId>& frame_ids) const {
  Extent out;
  for (FrameId frame_id : frame_ids) {
    auto frame = frames_.find(frame_id);
    if (frame == frames_.end()) continue;
    const Frame& f = frame->second;
    const uint64_t levels = 1 + f.inlined.size();
    uint64_t module = 0;
    if (auto m = modules_.find(f.module); m != modules_.end()) module = m->second.size();
    out.frames += levels;
    out.text_bytes += names_of(f) + levels * module;
  }
  return out;
}

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
