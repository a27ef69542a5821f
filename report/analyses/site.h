// report/analyses/site.h — where memory is charged: a call stack of the trace, or one the analyzer
// attributed because the trace had none (PyTorch records blocks allocated on the autograd engine's
// threads without frames).
//
// A SiteId packs the trace's stack id (low 32 bits) and how it was attributed (high bits), so the
// ledgers keep one key per site and never see a synthetic id that could collide with a trace's.
#pragma once

#include <cstdint>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

using SiteId = uint64_t;

enum class Attribution : uint8_t {
  None = 0,      // the trace's own stack for this allocation
  Backward = 1,  // allocated by the autograd engine while this stack's backward() ran
  NoFrames = 2,  // a PyTorch block recorded without frames, and no backward() open to charge it to
  // A block live when a PyTorch snapshot's history began (an "initial" event), without frames:
  // allocated before recording started.
  BeforeRecording = 3,
};

inline SiteId make_site(StackId stack, Attribution how = Attribution::None) {
  return static_cast<uint64_t>(how) << 32 | stack.value;
}
inline StackId site_stack(SiteId site) { return StackId(static_cast<uint32_t>(site)); }
inline Attribution site_attribution(SiteId site) { return static_cast<Attribution>(site >> 32); }

// The site's frames, innermost first. An attributed site starts with one marker frame that says
// so (function "[autograd engine thread, under backward()]" ...), so every output shows it.
Stack resolve_site(const SymbolTable& symbols, SiteId site);

}  // namespace gpumemtrace::report
