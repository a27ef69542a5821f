// report/analyses/autograd_attribution.cpp — frameless PyTorch blocks -> the backward() call.
#include "report/analyses/autograd_attribution.h"

#include "report/analyses/memory_model.h"

namespace gpumemtrace::report {

bool AutogradAttribution::on_backward_scope(const Event& e) {
  if (e.op == Op::ScopeBegin) {
    if (depth_++ < kMaxDepth) open_.push_back(e.stack);
    return false;
  }
  if (depth_ == 0) return false;  // an end without its begin (the trace started inside it)
  if (depth_-- <= kMaxDepth) open_.pop_back();
  return depth_ == 0;
}

SiteId AutogradAttribution::site_for(const Event& e) const {
  // A block the snapshot's history starts with, without the frames of its allocation: recorded before
  // recording started. One with frames is charged to them, as any block.
  if (e.initial && e.op == Op::BlockAlloc && !e.stack) return make_site(e.stack, Attribution::BeforeRecording);
  const bool frameless_block = !e.stack && (e.op == Op::BlockAlloc || e.kind == Kind::Block) &&
                               is_torch_api(e.api);
  if (!frameless_block) return make_site(e.stack);
  if (open_.empty()) return make_site(StackId(), Attribution::NoFrames);
  return make_site(open_.back(), Attribution::Backward);
}

Stack resolve_site(const SymbolTable& symbols, SiteId site) {
  Stack stack = symbols.resolve(site_stack(site));
  LogicalFrame marker;
  switch (site_attribution(site)) {
    case Attribution::None:
      return stack;
    case Attribution::Backward:
      marker.function = "[autograd engine thread, under backward()]";
      break;
    case Attribution::NoFrames:
      marker.function = "[PyTorch thread without Python frames (autograd engine)]";
      break;
    case Attribution::BeforeRecording:
      marker.function = "[allocated before recording started]";
      break;
  }
  stack.insert(stack.begin(), std::move(marker));
  return stack;
}

}  // namespace gpumemtrace::report
