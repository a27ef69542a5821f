// interpose/hooks/nvtx.cpp — NVTX ranges and marks as trace events, with no change to the program:
// the library makes itself the process's NVTX injection (tool) library.
//
// How NVTX finds a tool: NVTX v3 is header-only, so every module that uses it (the program, libtorch,
// a plugin) holds its own copy. On its first NVTX call a copy dlopen()s the library named by
// NVTX_INJECTION64_PATH and calls that library's InitializeInjectionNvtx2(), which fills the copy's
// callback tables. The headers' other ways in cannot reach a preloaded library: the dlsym() search for
// a pre-injected tool is compiled out, and the static `InitializeInjectionNvtx2_fnptr` is local to each
// module. So, at load time and only when the variable is unset, the library sets it to its own path:
// dlopen() of a loaded library returns it, and every NVTX copy of the process attaches here. When the
// variable names another tool (Nsight Systems), that tool keeps NVTX and this file records nothing.
//
// Events (api "nvtx"; a range of a named domain is labelled "domain: message"):
//   push/pop     scope_begin/scope_end on the calling thread. A pop carries no name: a per-thread stack
//                remembers it, and the end repeats the begin's label.
//   start/end    scope_begin/scope_end with "range": the id handed out here; the end may come from
//                another thread, and names the range again when the open-range table still holds it.
//   mark         a mark event.
// The memory extension (nvToolsExtMem.h) attaches through InitializeInjectionNvtxExtension, at the
// end of this file, and is recorded by nvtx_memory.cpp.
//
// Hot path (every callback): no malloc, no lock, no stdio. Labels are interned (label_table.h), so
// the pointer a stack entry keeps stays valid; domain and registered-string handles are interned
// names too. Callbacks never fail the program: when the recorder is off they only keep the books
// that their return values need.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <cwchar>
#include <utility>

#include "interpose/hooks/nvtx_memory.h"
#include "interpose/recorder/program_strings.h"
#include "interpose/recorder/config.h"
#include "interpose/recorder/label_table.h"
#include "interpose/recorder/recorder.h"

namespace f = gpumemtrace::format;

namespace {

constexpr const char* kInjectionVariable = "NVTX_INJECTION64_PATH";
// A range whose name could not be interned (the table is full) is still recorded, under this name,
// so that begin and end keep pairing.
constexpr const char* kUnnamedRange = "nvtx range (name table full)";

// Set once by the load-time constructor, before any NVTX call can reach InitializeInjectionNvtx2.
bool g_attach = false;

// ---- labels ----

// The text of a domain or registered-string handle: handles are the interned names handed out
// below (or kUnnamedRange); anything else the program passes is not dereferenced (null).
const char* handle_text(const void* handle) {
  if (handle == kUnnamedRange || gpumemtrace::is_interned_label(handle)) return static_cast<const char*>(handle);
  return nullptr;
}

// Builds "domain: message" (or "message" for the default domain) into `out`, UTF-8, NUL-terminated,
// cut at a character boundary; returns its length. `domain` is a handle from domain_create (an
// interned name) or null. The program's strings are read without faulting (program_strings.h): a
// message that runs into an unmapped page ends there.
class LabelBuilder {
 public:
  explicit LabelBuilder(nvtxDomainHandle_t domain) {
    if (const char* name = handle_text(domain)) {
      append(name);
      append(": ");
    }
  }
  void append(const char* text) {
    const size_t n = gpumemtrace::program_strnlen(text, kCapacity - length_, &pages_);
    for (size_t i = 0; i < n; ++i) out_[length_++] = text[i];
  }
  void append(const wchar_t* text) {  // UTF-32 -> UTF-8
    // At most one character per byte of room: no more of the program's array is read.
    const size_t readable = gpumemtrace::program_readable_bytes(text, (kCapacity + 1) * sizeof(wchar_t), &pages_);
    const wchar_t* const end = text + readable / sizeof(wchar_t);
    for (; text && text < end && *text; ++text) {
      const uint32_t c = static_cast<uint32_t>(*text);
      char bytes[4];
      int n = 0;
      if (c < 0x80) {
        bytes[n++] = static_cast<char>(c);
      } else if (c < 0x800) {
        bytes[n++] = static_cast<char>(0xC0 | (c >> 6));
        bytes[n++] = static_cast<char>(0x80 | (c & 0x3F));
      } else if (c < 0x10000) {
        bytes[n++] = static_cast<char>(0xE0 | (c >> 12));
        bytes[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        bytes[n++] = static_cast<char>(0x80 | (c & 0x3F));
      } else if (c < 0x110000) {
        bytes[n++] = static_cast<char>(0xF0 | (c >> 18));
        bytes[n++] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        bytes[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        bytes[n++] = static_cast<char>(0x80 | (c & 0x3F));
      }
      if (length_ + n > kCapacity) return;
      for (int i = 0; i < n; ++i) out_[length_++] = bytes[i];
    }
  }
  void append(int32_t type, const nvtxMessageValue_t& message) {
    switch (type) {
      case NVTX_MESSAGE_TYPE_ASCII: return append(message.ascii);
      case NVTX_MESSAGE_TYPE_UNICODE: return append(message.unicode);
      case NVTX_MESSAGE_TYPE_REGISTERED: return append(handle_text(message.registered));
      default: return;
    }
  }
  void append(const nvtxEventAttributes_t* attributes) {
    if (attributes) append(attributes->messageType, attributes->message);
  }
  bool empty() const { return length_ == 0; }
  // The text, NUL-terminated (valid while this builder lives).
  const char* text() {
    length_ = gpumemtrace::utf8_cut(out_, length_);
    out_[length_] = '\0';
    return out_;
  }
  // The text interned: valid forever; kUnnamedRange when the table is full.
  const char* interned() {
    const char* copy = gpumemtrace::intern_label(text(), length_);
    return copy ? copy : kUnnamedRange;
  }

 private:
  static constexpr size_t kCapacity = gpumemtrace::kMaxScopeNameBytes;
  char out_[kCapacity + 1];
  size_t length_ = 0;
  gpumemtrace::PageCache pages_;
};

void record_nvtx(f::Op op, const char* label, uint64_t range) {
  gpumemtrace::record_labelled(op, label, f::kApiNvtx, range);
}

// ---- push/pop: a per-thread stack ----

// Invariant: t_depth entries are open on this thread; the first kMaxPushDepth of them are in
// t_stack (deeper ones are counted, not recorded). Trivially destructible, initial-exec TLS: no
// allocation on a thread's first NVTX call. Kept small (512 bytes): the library's whole TLS block is
// static, and comes out of a small reserve in a process that dlopen()s it.
constexpr int kMaxPushDepth = 32;
struct PushedRange {
  const char* label;           // interned
  nvtxDomainHandle_t domain;   // null: the default domain
};
__thread PushedRange t_stack[kMaxPushDepth] __attribute__((tls_model("initial-exec")));
__thread int t_depth __attribute__((tls_model("initial-exec"))) = 0;

// The 0-based level of the innermost open range of `domain` (NVTX scopes levels to a domain).
int level_in(nvtxDomainHandle_t domain, int depth) {
  int level = -1;
  for (int i = 0; i < depth && i < kMaxPushDepth; ++i) level += t_stack[i].domain == domain ? 1 : 0;
  return level + (depth > kMaxPushDepth ? depth - kMaxPushDepth : 0);
}

int push(nvtxDomainHandle_t domain, LabelBuilder& label) {
  if (t_depth < kMaxPushDepth) {
    t_stack[t_depth] = {label.interned(), domain};
    record_nvtx(f::Op::ScopeBegin, t_stack[t_depth].label, 0);
  }
  ++t_depth;
  return level_in(domain, t_depth);
}

// Closes the innermost open range of `domain` on this thread; -1 when there is none.
int pop(nvtxDomainHandle_t domain) {
  if (t_depth == 0) return -1;
  const int level = level_in(domain, t_depth);
  if (t_depth > kMaxPushDepth) {  // the innermost ranges were not recorded: nor is their end
    --t_depth;
    return level;
  }
  int i = t_depth - 1;
  while (i >= 0 && t_stack[i].domain != domain) --i;
  if (i < 0) return -1;
  const char* label = t_stack[i].label;
  for (; i + 1 < t_depth; ++i) t_stack[i] = t_stack[i + 1];
  --t_depth;
  record_nvtx(f::Op::ScopeEnd, label, 0);
  return level;
}

// ---- start/end: ids, and a table of the open ones ----

// Open start/end ranges by id, so that an end can name its range. Open addressing over a fixed
// array; a slot is free when its id is 0. A start that finds no free slot within kProbes is still
// recorded, and its end carries only the id.
// Thread-safety: a slot is claimed by CAS on its id; its label is written after the claim and read
// only by the range's end, which cannot run before the start returned the id.
constexpr size_t kOpenRangeSlots = 4096;
constexpr size_t kProbes = 8;
struct OpenRangeSlot {
  std::atomic<uint64_t> id;
  std::atomic<const char*> label;
};
OpenRangeSlot g_open_ranges[kOpenRangeSlots];
std::atomic<uint64_t> g_last_range_id{0};

nvtxRangeId_t start(LabelBuilder& label) {
  const uint64_t id = g_last_range_id.fetch_add(1, std::memory_order_relaxed) + 1;
  const char* name = label.interned();
  for (size_t probe = 0; probe < kProbes; ++probe) {
    OpenRangeSlot& slot = g_open_ranges[(id + probe) % kOpenRangeSlots];
    uint64_t free_id = 0;
    if (slot.id.compare_exchange_strong(free_id, id, std::memory_order_acq_rel)) {
      slot.label.store(name, std::memory_order_release);
      break;
    }
  }
  record_nvtx(f::Op::ScopeBegin, name, id);
  return id;
}

void end(nvtxRangeId_t id) {
  if (id == 0) return;
  const char* name = nullptr;
  for (size_t probe = 0; probe < kProbes; ++probe) {
    OpenRangeSlot& slot = g_open_ranges[(id + probe) % kOpenRangeSlots];
    if (slot.id.load(std::memory_order_acquire) == id) {
      name = slot.label.load(std::memory_order_acquire);
      slot.id.store(0, std::memory_order_release);
      break;
    }
  }
  record_nvtx(f::Op::ScopeEnd, name, id);
}

void mark(LabelBuilder& label) { record_nvtx(f::Op::Mark, label.text(), 0); }

// ---- the callbacks NVTX calls (core and domain modules) ----

template <typename Message>
LabelBuilder labelled(nvtxDomainHandle_t domain, Message message) {
  LabelBuilder label(domain);
  label.append(message);
  return label;
}

void MarkEx(const nvtxEventAttributes_t* a) { auto l = labelled(nullptr, a); mark(l); }
void MarkA(const char* m) { auto l = labelled(nullptr, m); mark(l); }
void MarkW(const wchar_t* m) { auto l = labelled(nullptr, m); mark(l); }
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* a) { auto l = labelled(nullptr, a); return start(l); }
nvtxRangeId_t RangeStartA(const char* m) { auto l = labelled(nullptr, m); return start(l); }
nvtxRangeId_t RangeStartW(const wchar_t* m) { auto l = labelled(nullptr, m); return start(l); }
void RangeEnd(nvtxRangeId_t id) { end(id); }
int RangePushEx(const nvtxEventAttributes_t* a) { auto l = labelled(nullptr, a); return push(nullptr, l); }
int RangePushA(const char* m) { auto l = labelled(nullptr, m); return push(nullptr, l); }
int RangePushW(const wchar_t* m) { auto l = labelled(nullptr, m); return push(nullptr, l); }
int RangePop() { return pop(nullptr); }

void DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { auto l = labelled(d, a); mark(l); }
nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  auto l = labelled(d, a);
  return start(l);
}
void DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
int DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  auto l = labelled(d, a);
  return push(d, l);
}
int DomainRangePop(nvtxDomainHandle_t d) { return pop(d); }
// Domains and registered strings are their interned names (never freed, so destroy is a no-op).
template <typename Text>
const char* interned_name(Text text) {
  LabelBuilder name(nullptr);
  name.append(text);
  return name.interned();
}
nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<char*>(interned_name(s)));
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<char*>(interned_name(s)));
}
nvtxDomainHandle_t DomainCreateA(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<char*>(interned_name(name)));
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<char*>(interned_name(name)));
}
void DomainDestroy(nvtxDomainHandle_t) {}

// Fills one module's table: `entries` are (callback id, function) pairs. False when NVTX has no
// such module.
template <size_t N>
bool attach_module(const NvtxExportTableCallbacks* callbacks, NvtxCallbackModule module,
                   const std::pair<unsigned, NvtxFunctionPointer> (&entries)[N]) {
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(module, &table, &size) || !table) return false;
  for (const auto& [id, function] : entries)
    if (id < size && table[id]) *table[id] = function;
  return true;
}

template <typename Function>
NvtxFunctionPointer fn(Function function) {
  return reinterpret_cast<NvtxFunctionPointer>(function);
}

// True when `path` is this very library file (same device and inode).
bool is_this_library(const char* path, const char* own_path) {
  struct stat a, b;
  return path && own_path && stat(path, &a) == 0 && stat(own_path, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// Load time: decide whether to attach, and make NVTX find us. Runs before main() in a preloaded
// library (one thread: setenv is safe here). A copy of this library that NVTX dlopen()s in a process
// where it is not preloaded (a child that dropped LD_PRELOAD but kept the variable) does not attach:
// it would record NVTX events and no memory.
__attribute__((constructor)) void register_as_nvtx_injection() {
  // Quietly: this runs in every process the library is loaded into, CUDA or not; an invalid value is
  // said once by the recorder's start (lifecycle.cpp), in the processes that trace.
  const gpumemtrace::NvtxMode mode = gpumemtrace::parse_nvtx_mode(gpumemtrace::recorder_getenv(gpumemtrace::var::kNvtx),
                                                                   [](const char*) {});
  // Secure-execution mode: the environment is not changed (config.h).
  if (mode == gpumemtrace::NvtxMode::Off || gpumemtrace::secure_execution()) return;
  // Other settings' warnings are left to the recorder's start, which says them once.
  if (gpumemtrace::parse_config(gpumemtrace::recorder_getenv, [](const char*) {}).disabled) return;
  Dl_info self{};
  void* const own_symbol = reinterpret_cast<void*>(&register_as_nvtx_injection);
  if (!dladdr(own_symbol, &self) || !self.dli_fname) return;
  // Preloaded: the program's own symbol lookup (its global scope, not this library's local one, which
  // RTLD_DEFAULT would search too) finds this copy's entry point.
  void* const program = dlopen(nullptr, RTLD_NOW | RTLD_NOLOAD);
  void* const global = program ? dlsym(program, "InitializeInjectionNvtx2") : nullptr;
  if (program) dlclose(program);
  Dl_info found{};
  if (!global || !dladdr(global, &found) || found.dli_fbase != self.dli_fbase) return;
  char own_path[PATH_MAX];
  if (!realpath(self.dli_fname, own_path)) return;
  const char* current = getenv(kInjectionVariable);
  if (!current || !*current) {
    g_attach = setenv(kInjectionVariable, own_path, 1) == 0;
  } else if (is_this_library(current, own_path)) {
    g_attach = true;  // set by hand, or inherited from a traced parent
  } else if (mode == gpumemtrace::NvtxMode::On) {
    gpumemtrace::log_line("NVTX_INJECTION64_PATH names another tool; NVTX ranges go to it and are not recorded");
  }
}

}  // namespace

const char* gpumemtrace::nvtx_interned_message(int32_t type, const nvtxMessageValue_t& value) noexcept {
  LabelBuilder label(nullptr);
  label.append(type, value);
  if (label.empty()) return nullptr;
  const char* text = label.text();
  return gpumemtrace::intern_label(text, strlen(text));
}

// NVTX's entry point, called by each NVTX copy on its first call. Returns 1 when attached, 0 to leave
// that copy's calls as no-ops (NVTX then unloads what it loaded).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  if (!g_attach || !get_table) return 0;
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  static const std::pair<unsigned, NvtxFunctionPointer> kCore[] = {
      {NVTX_CBID_CORE_MarkEx, fn(MarkEx)},
      {NVTX_CBID_CORE_MarkA, fn(MarkA)},
      {NVTX_CBID_CORE_MarkW, fn(MarkW)},
      {NVTX_CBID_CORE_RangeStartEx, fn(RangeStartEx)},
      {NVTX_CBID_CORE_RangeStartA, fn(RangeStartA)},
      {NVTX_CBID_CORE_RangeStartW, fn(RangeStartW)},
      {NVTX_CBID_CORE_RangeEnd, fn(RangeEnd)},
      {NVTX_CBID_CORE_RangePushEx, fn(RangePushEx)},
      {NVTX_CBID_CORE_RangePushA, fn(RangePushA)},
      {NVTX_CBID_CORE_RangePushW, fn(RangePushW)},
      {NVTX_CBID_CORE_RangePop, fn(RangePop)},
  };
  static const std::pair<unsigned, NvtxFunctionPointer> kDomains[] = {
      {NVTX_CBID_CORE2_DomainMarkEx, fn(DomainMarkEx)},
      {NVTX_CBID_CORE2_DomainRangeStartEx, fn(DomainRangeStartEx)},
      {NVTX_CBID_CORE2_DomainRangeEnd, fn(DomainRangeEnd)},
      {NVTX_CBID_CORE2_DomainRangePushEx, fn(DomainRangePushEx)},
      {NVTX_CBID_CORE2_DomainRangePop, fn(DomainRangePop)},
      {NVTX_CBID_CORE2_DomainRegisterStringA, fn(DomainRegisterStringA)},
      {NVTX_CBID_CORE2_DomainRegisterStringW, fn(DomainRegisterStringW)},
      {NVTX_CBID_CORE2_DomainCreateA, fn(DomainCreateA)},
      {NVTX_CBID_CORE2_DomainCreateW, fn(DomainCreateW)},
      {NVTX_CBID_CORE2_DomainDestroy, fn(DomainDestroy)},
  };
  // A copy without the core module is not one we understand: stay out of it entirely.
  if (!attach_module(callbacks, NVTX_CB_MODULE_CORE, kCore)) return 0;
  attach_module(callbacks, NVTX_CB_MODULE_CORE2, kDomains);
  return 1;
}

// The entry point of NVTX extensions (nvtxExtInit.h), called by an NVTX copy on the first call of an
// extension, after InitializeInjectionNvtx2. Returns 1 when this library serves the extension, 0 to
// leave its calls as no-ops: only the memory extension is served (nvtx_memory.cpp).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module) {
  return g_attach && gpumemtrace::attach_nvtx_memory(module) ? 1 : 0;
}
