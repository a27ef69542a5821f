// report/analyses/scopes.h — scoped leak checks: memory allocated inside a named scope (a pytest
// test, gpumemtrace.scope("eval"), gpumemtrace_scope_begin/end) and still live when the scope ends
// is that scope's leak, even if it is freed later. This is what PyTorch's own test suite checks
// around every CUDA test.
//
// What counts: blocks (for tensors a scope leak is at the block level: the caching allocator's
// cache growing inside a test is not a leak), and CUDA-level memory that is not a caching
// allocator's segment or chunk. Memory a library keeps (a `held:` rule) or a `leak:` suppression
// matches does not count. Scopes nest and may come from any thread; an end closes the innermost
// open scope of the same name. A scope the trace ends inside is reported as not closed, with what
// was live at the end. A scope whose end carries a nonzero result (the work inside failed: a pytest
// test that failed or errored) is listed as failed and not checked, as PyTorch's CudaMemoryLeakCheck
// does not check a test that raised; but for the result bits of the pytest plugin's limits
// (trace/format.h): a test with a leak limit of its own is checked (and gated by that limit inside
// pytest, not by --fail-on-leak), and one that failed only for going over its own limit (it raised
// nothing) has its leak counted, though the gates leave it to pytest. What a scope left live and a
// garbage collection freed later is
// not its leak: it is listed apart, as held until garbage collection (held_until_gc.h).
//
// Memory: the open scopes, the holdings acquired while any scope is open and still live, and per
// reported scope its leaks by site (until the end, when the garbage collections are all known; plus
// held_until_gc.h's own). Cost: each scope end walks those holdings once.
#pragma once

#include <cstdint>
#include <map>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/held_until_gc.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/node_pool.h"
#include "report/analyses/open_scopes.h"
#include "report/analyses/suppressions.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

class Scopes : public ModelListener {
 public:
  Scopes(const MemoryModel& model, const SymbolTable& symbols, const Suppressions& suppressions)
      : model_(model), symbols_(symbols), suppressions_(suppressions) {}

  void on_acquire(const Holding& h) override;
  void on_release(const Holding& h) override;
  // scope_begin / scope_end events (not the autograd ones).
  void on_scope(const Event& e, uint64_t position);
  // The event the model applies next (the time and thread of the releases it causes), or none.
  void at(const Event& e) { gc_.at(e); }
  void at_no_event() { gc_.at_no_event(); }
  // A "gc" record: a garbage collection that freed objects.
  void on_gc(const Event& e) { gc_.on_window(e); }
  void finish(ProcessReport& out);

 private:
  struct OpenScope {
    std::string name;
    std::string api;
    uint64_t begin_position = 0;
    uint64_t begin_time = 0;
  };
  // `result`: the scope_end's result bits (trace/format.h, kScope*); 0 for a scope the trace ended inside.
  void close(const OpenScope& scope, uint64_t end_time, bool closed, int64_t result);
  bool counts(const Holding& h);

  const MemoryModel& model_;
  const SymbolTable& symbols_;
  const Suppressions& suppressions_;
  OpenScopes<OpenScope> open_;
  // Live holdings acquired while a scope was open, by (level, key): one entry per event inside a
  // scope (a test), so nodes from a pool.
  NodePool nodes_;  // before the map it serves
  std::pmr::unordered_map<uint64_t, Holding> inside_{&nodes_};
  std::unordered_map<StackId, bool> excluded_stacks_;  // held by a library or suppressed
  std::vector<ScopeReport> reports_;
  // Per report: its leaks by site, and what of them a garbage collection freed later (at the end).
  std::vector<std::map<SiteId, StackCount>> leak_sites_;
  HeldUntilGc gc_;
  uint64_t total_ = 0;
};

}  // namespace gpumemtrace::report
