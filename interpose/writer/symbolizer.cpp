// interpose/writer/symbolizer.cpp — libdwfl-based symbolization (the library heaptrack and perf use).
#include "interpose/writer/symbolizer.h"

#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <new>

#include "interpose/writer/private_fds.h"

namespace gpumemtrace {

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

// libdw's own handler for an allocation that failed calls error(EXIT_FAILURE): the program would exit
// with status 1 (its buffered output lost) for lack of memory in our thread. Ours throws instead; the
// serializer catches it and turns symbolization off (serializer.cpp). libdw calls the handler before it
// takes any lock, and the Dwfl is never used again afterwards.
[[noreturn]] void libdw_out_of_memory() { throw std::bad_alloc(); }

const Dwfl_Callbacks kCallbacks = {
    find_elf_fd_high,
    find_local_debuginfo,
    nullptr,
    &g_debuginfo_path,
};

}  // namespace

struct Symbolizer::Impl {
  Dwfl* dwfl = nullptr;
  UnitIndex units;  // for modules without .debug_aranges (clang's)
  void report() {
    units.clear();  // a module may be gone, and its Dwfl_Module's address reused
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
  if (!impl_->dwfl || return_address == 0) return Symbolized{};
  const Dwarf_Addr addr = return_address - 1;
  Dwfl_Module* mod = dwfl_addrmodule(impl_->dwfl, addr);
  if (!mod) return Symbolized{};
  Dwarf_Addr bias = 0;
  if (Dwarf* dwarf = dwfl_module_getdwarf(mod, &bias)) dwarf_new_oom_handler(dwarf, libdw_out_of_memory);
  return symbolize_in_module(mod, addr, &impl_->units);
}

}  // namespace gpumemtrace
