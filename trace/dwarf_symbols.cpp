// trace/dwarf_symbols.cpp — function, file:line and inlined calls at one address of one Dwfl module.
#include "trace/dwarf_symbols.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

namespace gpumemtrace {

std::string demangle(const char* name) {
  if (!name) return "";
  // Only a mangled name: __cxa_demangle also reads a bare type encoding, so a C function named `v`, `f`
  // or `i` would become "void", "float", "int".
  if (std::strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out = d;
  free(d);
  return out;
}

namespace {

// The linkage name of a subprogram or inlined-subroutine DIE, demangled, following abstract origins
// and specifications; "" when it has none (C functions, `main`).
std::string die_linkage_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr))
      if (const char* s = dwarf_formstring(&attr)) return demangle(s);
  }
  return "";
}

std::string die_plain_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  if (dwarf_attr_integrate(die, DW_AT_name, &attr))
    if (const char* s = dwarf_formstring(&attr)) return s;
  return "";
}

// The name eu-addr2line -C gives a DIE (src/addr2line.c, get_diename): the linkage name demangled,
// else DW_AT_name.
std::string die_function_name(Dwarf_Die* die) {
  std::string name = die_linkage_name(die);
  return name.empty() ? die_plain_name(die) : name;
}

// A demangled name without the clone suffixes GCC gives the symbols of the copies it makes of a
// function (`f(int) [clone .constprop.0] [clone .cold]` -> `f(int)`): the source has no such function.
std::string without_clone_suffix(std::string name) {
  for (size_t at; (at = name.rfind(" [clone ")) != std::string::npos && name.back() == ']';) name.resize(at);
  return name;
}

// The real function's name. Its DIE's, as eu-addr2line gives it, where that is a linkage name (C++
// with external linkage: qualified, with parameters) or the name of a C function (its ELF symbol may
// be a copy's, `f.part.0`; DWARF also names the right function where only a preceding symbol covers
// the address). Otherwise the ELF symbol, demangled, without clone suffixes: GCC writes no linkage
// name for C++ functions with internal linkage (in an anonymous namespace, or taking a type from
// one), whose DW_AT_name (`compute_loss`) says less than the symbol
// (`(anonymous namespace)::compute_loss(Batch const&)`); and there may be no DWARF at all.
std::string outer_function_name(Dwarf_Die* subprogram, const char* elf_symbol) {
  const bool cxx_symbol = elf_symbol && std::strncmp(elf_symbol, "_Z", 2) == 0;
  if (subprogram) {
    std::string name = die_linkage_name(subprogram);
    if (!name.empty()) return name;
    if (!cxx_symbol) {
      name = die_plain_name(subprogram);
      if (!name.empty()) return name;
    }
  }
  return cxx_symbol ? without_clone_suffix(demangle(elf_symbol)) : demangle(elf_symbol);
}

// Where an inlined subroutine was called from, in the function it was inlined into.
SourceLocation call_site(Dwarf_Die* inlined, Dwarf_Files* files, size_t nfiles) {
  SourceLocation at;
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  if (files && dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &value) == 0 && value < nfiles)
    if (const char* file = dwarf_filesrc(files, value, nullptr, nullptr)) at.file = file;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &value) == 0) at.line = static_cast<int>(value);
  return at;
}

// True for the DIEs that can hold code at an address: the scopes a pc lies in.
bool is_code_scope(int tag) {
  switch (tag) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_entry_point:
    case DW_TAG_lexical_block:
    case DW_TAG_with_stmt:
    case DW_TAG_catch_block:
    case DW_TAG_try_block:
    case DW_TAG_module:
      return true;
    default:
      return false;
  }
}

// Bounds against malformed DWARF (the offline symbolizer reads files a trace names): no real
// program nests scopes or namespaces this deep, or chains this many imported units.
constexpr size_t kMaxNesting = 256;
constexpr int kMaxImports = 64;

struct ScopeSearch {
  Dwarf_Addr pc;
  int imports_left = kMaxImports;
  std::vector<Dwarf_Die> path;  // the scopes found, from the unit inwards
};

// Extends search.path with the scopes inside `parent` that contain the pc: each code scope that
// contains it is entered and its children searched in turn, the first that contains it winning;
// namespaces are looked through, and an imported unit (dwz) is searched as part of the scope that
// imports it. Returns true when it found a code scope.
bool descend(ScopeSearch& search, Dwarf_Die parent, size_t nesting) {
  bool found = false;
  while (search.path.size() < kMaxNesting) {
    Dwarf_Die child;
    if (dwarf_child(&parent, &child) != 0) return found;
    bool entered = false;
    do {
      const int tag = dwarf_tag(&child);
      if (is_code_scope(tag)) {
        if (dwarf_haspc(&child, search.pc) > 0) {
          search.path.push_back(child);
          parent = child;
          entered = true;
        }
      } else if (tag == DW_TAG_namespace && nesting < kMaxNesting) {
        if (descend(search, child, nesting + 1)) return true;
      } else if (tag == DW_TAG_imported_unit && nesting < kMaxNesting && search.imports_left-- > 0) {
        Dwarf_Attribute attr;
        Dwarf_Die unit;
        if (dwarf_formref_die(dwarf_attr(&child, DW_AT_import, &attr), &unit) && descend(search, unit, nesting + 1))
          return true;
      }
    } while (!entered && dwarf_siblingof(&child, &child) == 0);
    if (!entered) return found;
    found = true;
  }
  return found;
}

// The concrete scopes that contain `pc`, innermost first: lexical blocks, every inlined subroutine,
// the subprogram around them.
//
// Not dwarf_getscopes: past the innermost inlined subroutine it lists the scopes of that function's
// abstract definition (libdw/dwarf_getscopes.c, origin_match), not the functions it was inlined into,
// so every level but the innermost was lost; and on GCC's link-time optimized units, whose abstract
// definitions lie in other units, elfutils 0.188 finds no scope at all. eu-addr2line -i asks
// dwarf_getscopes_die for the innermost scope's parents, a second walk of the whole unit; one descent
// pruned by pc gives the same chain for the cost of dwarf_getscopes' first walk.
std::vector<Dwarf_Die> scopes_containing(Dwarf_Die* cudie, Dwarf_Addr pc) {
  ScopeSearch search;
  search.pc = pc;
  descend(search, *cudie, 0);
  return std::vector<Dwarf_Die>(search.path.rbegin(), search.path.rend());
}

}  // namespace

Dwarf_Die* UnitIndex::find(Dwfl_Module* module, Dwarf_Addr addr, Dwarf_Die* storage, Dwarf_Addr* bias) {
  Dwarf_Addr dwarf_bias = 0;
  Dwarf* dwarf = dwfl_module_getdwarf(module, &dwarf_bias);
  if (!dwarf) return nullptr;
  auto [entry, added] = modules_.try_emplace(module);
  std::vector<Range>& ranges = entry->second;
  Dwarf_Aranges* aranges = nullptr;
  size_t naranges = 0;
  if (added && !(dwarf_getaranges(dwarf, &aranges, &naranges) == 0 && naranges > 0)) {
    Dwarf_Addr unit_bias = 0;
    for (Dwarf_Die* unit = nullptr; (unit = dwfl_module_nextcu(module, unit, &unit_bias)) != nullptr;) {
      Dwarf_Addr base = 0, start = 0, end = 0;
      for (ptrdiff_t at = 0; (at = dwarf_ranges(unit, at, &base, &start, &end)) > 0;)
        if (start < end) ranges.push_back(Range{start, end, dwarf_dieoffset(unit)});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  }
  // Units' ranges do not overlap: the one to look at is the last that starts at or before pc.
  const Dwarf_Addr pc = addr - dwarf_bias;
  auto after = std::upper_bound(ranges.begin(), ranges.end(), pc,
                                [](Dwarf_Addr value, const Range& r) { return value < r.lo; });
  if (after == ranges.begin() || pc >= std::prev(after)->hi) return nullptr;
  if (!dwarf_offdie(dwarf, std::prev(after)->unit, storage)) return nullptr;
  *bias = dwarf_bias;
  return storage;
}

Symbolized symbolize_in_module(Dwfl_Module* module, Dwarf_Addr addr, UnitIndex* units) {
  Symbolized out;
  const char* elf_symbol = dwfl_module_addrname(module, addr);
  Dwarf_Addr bias = 0;
  Dwarf_Die unit_storage;
  Dwarf_Die* cudie = dwfl_module_addrdie(module, addr, &bias);
  const bool found_by_index = !cudie && units && (cudie = units->find(module, addr, &unit_storage, &bias));

  // The address's own line: inside the innermost inlined function, if any. libdwfl finds it through
  // the aranges as it finds the unit; in a unit only the index found, the unit's line table is asked.
  SourceLocation cur;
  int lineno = 0;
  if (!found_by_index) {
    if (Dwfl_Line* line = dwfl_module_getsrc(module, addr)) {
      if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
        cur.file = file;
        cur.line = lineno;
      }
    }
  } else if (Dwarf_Line* line = dwarf_getsrc_die(cudie, addr - bias)) {
    const char* file = dwarf_linesrc(line, nullptr, nullptr);
    if (file && dwarf_lineno(line, &lineno) == 0) {
      cur.file = file;
      cur.line = lineno;
    }
  }

  // From the innermost scope outwards: each inlined subroutine is a level of its own at `cur`, and
  // its call site is where the level around it is; the subprogram ends the walk.
  std::vector<Dwarf_Die> scopes;
  if (cudie) scopes = scopes_containing(cudie, addr - bias);
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (!scopes.empty() && dwarf_getsrcfiles(cudie, &files, &nfiles) != 0) files = nullptr;
  Dwarf_Die* subprogram = nullptr;
  for (size_t i = 0; i < scopes.size() && !subprogram; ++i) {
    switch (dwarf_tag(&scopes[i])) {
      case DW_TAG_inlined_subroutine:
        cur.function = die_function_name(&scopes[i]);
        out.inlined.push_back(cur);
        cur = call_site(&scopes[i], files, nfiles);
        break;
      case DW_TAG_subprogram:
      case DW_TAG_entry_point:
        subprogram = &scopes[i];
        break;
      default:  // lexical blocks and the like: not a level of their own
        break;
    }
  }
  out.outer = cur;
  out.outer.function = outer_function_name(subprogram, elf_symbol);
  return out;
}

}  // namespace gpumemtrace
