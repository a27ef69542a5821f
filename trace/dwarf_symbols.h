// trace/dwarf_symbols.h — one address inside one ELF module -> function, file:line and the functions
// inlined there (elfutils libdw). Shared by the recorder's writer (modules of the live process) and
// the analyzer's offline symbolizer (module files named by a trace), so that both name a frame the
// same way. Stateless: thread-safety is that of the Dwfl the module belongs to.
#pragma once

#include <elfutils/libdwfl.h>

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

// A C++ symbol demangled; any other name as it is; "" for null.
std::string demangle(const char* name);

// `addr` is a Dwfl address inside `module`: the call instruction, i.e. a return address minus one
// (every frame of a recorded stack is a return address; the byte before it is the call).
Symbolized symbolize_in_module(Dwfl_Module* module, Dwarf_Addr addr);

}  // namespace gpumemtrace
