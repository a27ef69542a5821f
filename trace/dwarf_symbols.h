// trace/dwarf_symbols.h — one address inside one ELF module -> function, file:line and the functions
// inlined there (elfutils libdw). Shared by the recorder's writer (modules of the live process) and
// the analyzer's offline symbolizer (module files named by a trace), so that both name a frame the
// same way, and the way `eu-addr2line -i -f -C` does (tests/e2e/test_inlined_frames.py compares them).
// Stateless: thread-safety is that of the Dwfl the module belongs to.
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

// Every inlined level at an address is a location of its own. Innermost first:
//   inlined[0]         the innermost inlined function, at the address's own line;
//   inlined[i]         the function inlined[i - 1] was inlined into, at the call of inlined[i - 1]
//                      (that subroutine's DW_AT_call_file/DW_AT_call_line);
//   outer              the real function, at the call of the last inlined level (or, with nothing
//                      inlined, at the address's own line).
struct Symbolized {
  SourceLocation outer;                // the real (outermost) function at the address
  std::vector<SourceLocation> inlined; // functions inlined at the address, innermost first
};

// A C++ symbol demangled; any other name as it is; "" for null.
std::string demangle(const char* name);

// `addr` is a Dwfl address inside `module`: the call instruction, i.e. a return address minus one
// (every frame of a recorded stack is a return address; the byte before it is the call, so the line
// and the inlined levels are those of the call, not of the instruction after it).
Symbolized symbolize_in_module(Dwfl_Module* module, Dwarf_Addr addr);

}  // namespace gpumemtrace
