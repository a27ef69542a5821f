// interpose/writer/modules.cpp — the module map: loaded ELF objects from dl_iterate_phdr, with build ids.
#include "interpose/writer/modules.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace gpumemtrace {
namespace {

struct ScanState {
  bool scanned_before = false;             // in: a scan with these counters exists
  unsigned long long known_adds = 0, known_subs = 0;
  bool unchanged = false;                  // out: nothing loaded or unloaded since that scan
  std::vector<Module> found;
  unsigned long long adds = 0, subs = 0;
};

std::string read_build_id(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (desc + note->n_descsz > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        static const char kHex[] = "0123456789abcdef";
        std::string hex;
        for (unsigned j = 0; j < note->n_descsz; ++j) {
          const unsigned char b = static_cast<unsigned char>(desc[j]);
          hex += kHex[b >> 4];
          hex += kHex[b & 15];
        }
        return hex;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return "";
}

std::string main_executable_path() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  return path;
}

int collect(dl_phdr_info* info, size_t size, void* data) {
  auto* state = static_cast<ScanState*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    state->adds = info->dlpi_adds;
    state->subs = info->dlpi_subs;
    // The loader's counters are the same in every callback: stop at the first one when unchanged.
    if (state->found.empty() && state->scanned_before && state->adds == state->known_adds &&
        state->subs == state->known_subs) {
      state->unchanged = true;
      return 1;
    }
  }
  Module m;
  m.base = info->dlpi_addr;
  m.lo = UINTPTR_MAX;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    m.lo = std::min<uintptr_t>(m.lo, info->dlpi_addr + ph.p_vaddr);
    m.hi = std::max<uintptr_t>(m.hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (m.hi == 0) return 0;
  m.path = info->dlpi_name ? info->dlpi_name : "";
  if (m.path.empty() && state->found.empty()) m.path = main_executable_path();  // first = the program
  if (m.path.empty()) return 0;  // vdso and friends without a name
  m.build_id = read_build_id(info);
  state->found.push_back(std::move(m));
  return 0;
}

}  // namespace

void ModuleMap::refresh(std::vector<uint32_t>* added) {
  ScanState state;
  state.scanned_before = scanned_;
  state.known_adds = adds_;
  state.known_subs = subs_;
  dl_iterate_phdr(collect, &state);
  if (state.unchanged) return;
  scanned_ = true;
  adds_ = state.adds;
  subs_ = state.subs;
  std::vector<size_t> current;
  for (Module& m : state.found) {
    auto same = [&](const Module& k) { return k.base == m.base && k.lo == m.lo && k.path == m.path; };
    auto it = std::find_if(modules_.begin(), modules_.end(), same);
    if (it == modules_.end()) {
      m.id = static_cast<uint32_t>(modules_.size() + 1);
      modules_.push_back(std::move(m));
      it = modules_.end() - 1;
      if (added) added->push_back(it->id);
    }
    current.push_back(static_cast<size_t>(it - modules_.begin()));
  }
  by_address_.clear();
  for (size_t i : current) by_address_.push_back(&modules_[i]);
  std::sort(by_address_.begin(), by_address_.end(), [](const Module* a, const Module* b) { return a->lo < b->lo; });
}

const Module* ModuleMap::find(uintptr_t ip) const {
  auto it = std::upper_bound(by_address_.begin(), by_address_.end(), ip,
                             [](uintptr_t v, const Module* m) { return v < m->lo; });
  if (it == by_address_.begin()) return nullptr;
  const Module* m = *(it - 1);
  return ip < m->hi ? m : nullptr;
}

}  // namespace gpumemtrace
