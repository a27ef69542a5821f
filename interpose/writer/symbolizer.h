// interpose/writer/symbolizer.h — instruction pointer -> function, file, line, inlined frames.
// elfutils libdwfl over the process's own modules, in the writer thread, once per unique address (the
// writer caches results); the lookup itself is trace/dwarf_symbols.h, shared with gpumem-report.
// Not thread-safe: one instance, used by the writer thread only.
#pragma once

#include <cstdint>
#include <memory>

#include "trace/dwarf_symbols.h"  // SourceLocation, Symbolized

namespace gpumemtrace {

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  // Re-reads the process's mappings (after dlopen).
  void refresh();
  // `return_address` is a return address (every frame of our stacks is one): the call instruction is
  // the byte before it, which is what gets looked up.
  Symbolized symbolize(uintptr_t return_address);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumemtrace
