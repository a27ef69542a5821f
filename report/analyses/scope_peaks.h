// report/analyses/scope_peaks.h — each scope's own high-water mark (a pytest test's peak): the most
// bytes allocated inside the scope and live at one moment, as pytest-memray's limit_memory counts a
// test's allocations. Memory held before the scope began does not count, so a test is not blamed
// for what an earlier one kept.
//
// Counted at the block level when the scope allocated blocks (tensors: a caching allocator's segments
// are its cache, not the test's memory), else at the CUDA level, without a library's memory (Roles'
// class of the holding, decided when it is acquired). Summed over the process's devices. Scopes pair
// as in scopes.h (an end closes the innermost open scope of its name); ScopeReports get their
// peak_bytes in finish().
//
// Memory: the open scopes (at most kMaxOpenScopes) and the counted holdings live inside them.
// Cost: O(open scopes) per acquire and release while a scope is open. Single-threaded.
// Listener order: after Roles, which classifies a holding on acquire.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/memory_model.h"
#include "report/analyses/node_pool.h"
#include "report/analyses/open_scopes.h"
#include "report/analyses/roles.h"

namespace gpumemtrace::report {

class ScopePeaks : public ModelListener {
 public:
  explicit ScopePeaks(const Roles& roles) : roles_(roles) {}

  void on_acquire(const Holding& h) override;
  void on_release(const Holding& h) override;
  // scope_begin / scope_end events of leak-check scopes (as Scopes::on_scope gets them).
  void on_scope(const Event& e, uint64_t position);
  // Sets each ScopeReport's peak_bytes (matched by name and begin time).
  void finish(ProcessReport& out);

 private:
  struct Open {
    std::string name;
    uint64_t begin_position = 0;
    uint64_t begin_time = 0;
    uint64_t live[2] = {};  // [0]: blocks, [1]: CUDA level
    uint64_t peak[2] = {};
    bool blocks = false;    // it allocated blocks: its peak is theirs
    uint64_t result() const { return blocks ? peak[0] : peak[1]; }
  };
  struct Counted {
    uint64_t position = 0;
    uint64_t size = 0;
    bool block = false;
  };

  const Roles& roles_;
  OpenScopes<Open> open_;
  NodePool nodes_;  // before the map it serves
  std::pmr::unordered_map<uint64_t, Counted> inside_{&nodes_};
  // (name, begin time) -> peak of each scope that ended or is still open at the end.
  std::vector<Open> ended_;
};

}  // namespace gpumemtrace::report
