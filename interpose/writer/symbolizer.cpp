// interpose/writer/symbolizer.cpp — libdwfl-based symbolization (the library heaptrack and perf use).
#include "interpose/writer/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <cstdlib>

#include "interpose/writer/trace_file.h"

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

char* g_debuginfo_path = nullptr;

// Separate debug files are looked up locally only, by build-id (/usr/lib/debug/.build-id, where
// Debian's -dbgsym packages put them); a module's own DWARF is used directly. Never the standard
// finder: it may call debuginfod, which makes network requests from inside the profiled program and
// initialises curl/OpenSSL in the writer thread, racing the program's exit handlers that tear them
// down (an intermittent SIGSEGV at exit, seen in tests/python).
// libdwfl keeps the descriptors these return open as long as it knows the module: both are moved to
// high numbers (move_fd_high), out of the way of a program that closes and reuses low ones.
int find_local_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                         const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                         char** debuginfo_file_name) {
  return move_fd_high(dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                                   debuglink_crc, debuginfo_file_name));
}

int find_elf_fd_high(Dwfl_Module* mod, void** userdata, const char* module_name, Dwarf_Addr base,
                     char** file_name, Elf** elfp) {
  return move_fd_high(dwfl_linux_proc_find_elf(mod, userdata, module_name, base, file_name, elfp));
}

const Dwfl_Callbacks kCallbacks = {
    find_elf_fd_high,
    find_local_debuginfo,
    nullptr,
    &g_debuginfo_path,
};

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

struct Symbolizer::Impl {
  Dwfl* dwfl = nullptr;
  void report() {
    if (!dwfl) {
      dwfl = dwfl_begin(&kCallbacks);
      if (!dwfl) return;
      dwfl_report_begin(dwfl);
    } else {
      dwfl_report_begin_add(dwfl);
    }
    dwfl_linux_proc_report(dwfl, getpid());
    dwfl_report_end(dwfl, nullptr, nullptr);
  }
  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer() : impl_(new Impl) { impl_->report(); }
Symbolizer::~Symbolizer() = default;
void Symbolizer::refresh() { impl_->report(); }

Symbolized Symbolizer::symbolize(uintptr_t return_address) {
  Symbolized out;
  if (!impl_->dwfl || return_address == 0) return out;
  const Dwarf_Addr addr = return_address - 1;
  Dwfl_Module* mod = dwfl_addrmodule(impl_->dwfl, addr);
  if (!mod) return out;
  out.outer.function = demangle(dwfl_module_addrname(mod, addr));

  // Innermost source line at the address (inside the innermost inlined function, if any).
  SourceLocation cur;
  cur.function = out.outer.function;
  if (Dwfl_Line* line = dwfl_module_getsrc(mod, addr)) {
    int lineno = 0;
    if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
      cur.file = file;
      cur.line = lineno;
    }
  }

  // Walk the DWARF scopes from the innermost outwards: each inlined subroutine contributes a frame,
  // and its DW_AT_call_file/DW_AT_call_line give the location in its caller.
  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(mod, addr, &bias);
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
