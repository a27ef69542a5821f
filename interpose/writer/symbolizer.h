// interpose/writer/symbolizer.h — instruction pointer -> function, file, line, inlined frames.
// elfutils libdwfl, in the writer thread, once per unique address (the writer caches results).
// Not thread-safe: one instance, used by the writer thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpumemtrace {

struct SourceLocation {
  std::string function;  // demangled; "" when no symbol covers the address
  std::string file;      // "" when there is no line information
  int line = 0;
};

struct Symbolized {
  SourceLocation outer;                // the real (outermost) function at the address
  std::vector<SourceLocation> inlined; // functions inlined at the address, innermost first
};

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

std::string demangle(const char* name);

}  // namespace gpumemtrace
