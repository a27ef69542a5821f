// trace/dwarf_symbols.h — one address inside one ELF module -> function, file:line and the functions
// inlined there (elfutils libdw). Shared by the recorder's writer (modules of the live process) and
// the analyzer's offline symbolizer (module files named by a trace), so that both name a frame the
// same way, and the way `eu-addr2line -i -f -C` does (tests/e2e/test_inlined_frames.py compares them).
// symbolize_in_module keeps no state but the UnitIndex its caller passes; thread-safety is that of the
// Dwfl the module belongs to (and of that index).
#pragma once

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <string>
#include <unordered_map>
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

// A C++ symbol (an Itanium mangled name, "_Z...") demangled; any other name as it is ("v" stays "v");
// "" for null.
std::string demangle(const char* name);

// The compile units of modules whose DWARF has no .debug_aranges, by address. clang writes none
// unless given -gdwarf-aranges, and elfutils 0.188 then finds no unit for any address
// (dwfl_module_addrdie fails: no line, no inlined level, only the ELF symbol; eu-addr2line says
// `??:0`). For such a module the units' own ranges (DW_AT_low_pc/high_pc, DW_AT_ranges) are read
// once, on the first address asked for; a module with aranges is noted and never read (so in a
// module linked from GCC's and clang's objects, the clang units stay without lines).
// Memory: one entry per range of each unit of such a module. Not thread-safe: one per Dwfl user.
class UnitIndex {
 public:
  // The unit whose ranges hold `addr`, a Dwfl address of `module`, copied into *storage; *bias as
  // dwfl_module_addrdie sets it. nullptr when the module has aranges (libdwfl has answered) or no
  // unit holds the address.
  Dwarf_Die* find(Dwfl_Module* module, Dwarf_Addr addr, Dwarf_Die* storage, Dwarf_Addr* bias);
  // Forgets every module (their Dwfl_Module pointers may be reused after a Dwfl is changed).
  void clear() { modules_.clear(); }

 private:
  struct Range {
    Dwarf_Addr lo, hi;  // [lo, hi), DWARF addresses
    Dwarf_Off unit;     // the unit's DIE offset in .debug_info
  };
  std::unordered_map<Dwfl_Module*, std::vector<Range>> modules_;  // sorted by lo; empty: nothing to add
};

// `addr` is a Dwfl address inside `module`: the call instruction, i.e. a return address minus one
// (every frame of a recorded stack is a return address; the byte before it is the call, so the line
// and the inlined levels are those of the call, not of the instruction after it). `units`, when
// given, finds the unit where libdwfl finds none (see UnitIndex).
Symbolized symbolize_in_module(Dwfl_Module* module, Dwarf_Addr addr, UnitIndex* units = nullptr);

}  // namespace gpumemtrace
