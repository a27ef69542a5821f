// trace/dwarf_symbols.cpp — function, file:line and inlined calls at one address of one Dwfl module.
#include "trace/dwarf_symbols.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cstdlib>

namespace gpumemtrace {

std::string demangle(const char* name) {
  if (!name) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out = d;
  free(d);
  return out;
}

namespace {

// The name of a subprogram or inlined-subroutine DIE, demangled, following abstract origins.
std::string die_function_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr))
      if (const char* s = dwarf_formstring(&attr)) return demangle(s);
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr))
    if (const char* s = dwarf_formstring(&attr)) return s;
  return "";
}

}  // namespace

Symbolized symbolize_in_module(Dwfl_Module* module, Dwarf_Addr addr) {
  Symbolized out;
  out.outer.function = demangle(dwfl_module_addrname(module, addr));

  // Innermost source line at the address (inside the innermost inlined function, if any).
  SourceLocation cur;
  cur.function = out.outer.function;
  if (Dwfl_Line* line = dwfl_module_getsrc(module, addr)) {
    int lineno = 0;
    if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
      cur.file = file;
      cur.line = lineno;
    }
  }

  // Walk the DWARF scopes from the innermost outwards: each inlined subroutine contributes a frame,
  // and its DW_AT_call_file/DW_AT_call_line give the location in its caller.
  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(module, addr, &bias);
  Dwarf_Die* scopes = nullptr;
  const int nscopes = cudie ? dwarf_getscopes(cudie, addr - bias, &scopes) : 0;
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (cudie) dwarf_getsrcfiles(cudie, &files, &nfiles);
  for (int i = 0; i < nscopes; ++i) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_inlined_subroutine) {
      cur.function = die_function_name(&scopes[i]);
      out.inlined.push_back(cur);
      cur = SourceLocation{};
      Dwarf_Attribute attr;
      Dwarf_Word value = 0;
      if (dwarf_attr(&scopes[i], DW_AT_call_file, &attr) && dwarf_formudata(&attr, &value) == 0 && files &&
          value < nfiles)
        if (const char* f = dwarf_filesrc(files, value, nullptr, nullptr)) cur.file = f;
      if (dwarf_attr(&scopes[i], DW_AT_call_line, &attr) && dwarf_formudata(&attr, &value) == 0)
        cur.line = static_cast<int>(value);
    } else if (tag == DW_TAG_subprogram) {
      break;
    }
  }
  free(scopes);
  // The outermost frame keeps the ELF symbol's name (present even without debug information).
  if (out.outer.function.empty()) out.outer.function = cur.function;
  out.outer.file = cur.file;
  out.outer.line = cur.line;
  return out;
}

}  // namespace gpumemtrace
