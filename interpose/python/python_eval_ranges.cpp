// interpose/python/python_eval_ranges.cpp — see python_eval_ranges.h.
#include "interpose/python/python_eval_ranges.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>  // ElfW
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace gpumemtrace::python {
namespace {

bool is_eval_name(const char* name) {
  static const char kEval[] = "_PyEval_EvalFrameDefault";
  size_t n = sizeof(kEval) - 1;
  return strncmp(name, kEval, n) == 0 && (name[n] == 0 || name[n] == '.');
}

// Appends the eval symbols of one symbol table section.
void scan_symbols(const uint8_t* file, size_t size, const ElfW(Shdr)* shdrs, int nsec, const ElfW(Shdr)& sym,
                  uintptr_t bias, std::vector<AddressRange>* out) {
  if (sym.sh_link >= static_cast<unsigned>(nsec) || sym.sh_entsize != sizeof(ElfW(Sym))) return;
  const ElfW(Shdr)& str = shdrs[sym.sh_link];
  if (sym.sh_offset + sym.sh_size > size || str.sh_offset + str.sh_size > size) return;
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(file + sym.sh_offset);
  const char* strtab = reinterpret_cast<const char*>(file + str.sh_offset);
  size_t n = sym.sh_size / sizeof(ElfW(Sym));
  for (size_t i = 0; i < n; ++i) {
    if (ELF64_ST_TYPE(syms[i].st_info) != STT_FUNC || syms[i].st_size == 0) continue;
    if (syms[i].st_name >= str.sh_size) continue;
    if (!is_eval_name(strtab + syms[i].st_name)) continue;
    out->push_back({bias + syms[i].st_value, bias + syms[i].st_value + syms[i].st_size});
  }
}

}  // namespace

namespace {

void scan_file(const char* path, uintptr_t bias, std::vector<AddressRange>* out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    close(fd);
    return;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  const auto* file = static_cast<const uint8_t*>(map);
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(file);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      eh->e_shentsize == sizeof(ElfW(Shdr)) && eh->e_shoff + eh->e_shnum * sizeof(ElfW(Shdr)) <= size) {
    const auto* sh = reinterpret_cast<const ElfW(Shdr)*>(file + eh->e_shoff);
    // .symtab has the local parts (.cold); .dynsym only the exported symbol. Prefer .symtab.
    for (int pass = 0; pass < 2 && out->empty(); ++pass) {
      unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
      for (int i = 0; i < eh->e_shnum; ++i)
        if (sh[i].sh_type == want) scan_symbols(file, size, sh, eh->e_shnum, sh[i], bias, out);
    }
  }
  munmap(map, size);
}

}  // namespace

std::vector<AddressRange> find_eval_ranges(const char* path, uintptr_t bias, AddressRange exported) {
  std::vector<AddressRange> out;
  if (path && path[0]) scan_file(path, bias, &out);
  if (out.empty() && exported.end > exported.begin) out.push_back(exported);
  return out;
}

}  // namespace gpumemtrace::python
