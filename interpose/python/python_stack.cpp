// interpose/python/python_stack.cpp — the CPython frame reader behind python_stack.h.
//
// Capture (hot path, any thread, usually WITHOUT the GIL): the calling thread is blocked in C inside
// a CUDA call, so its own Python frame chain cannot change under us, and every frame holds a reference
// to its code object. We read that chain straight from memory, starting at
// PyGILState_GetThisThreadState() (a thread-specific-storage read: no GIL, no lock, no malloc), with
// per-version offsets (python_offsets.h). Never PyGILState_Ensure(): PyTorch holds its allocator lock
// around cudaMalloc, and taking the GIL there deadlocks. Each frame's code object is looked up in the
// code table (python_code_table.h), which copies its strings and line table the first time; the ring
// only carries (table id, eval group, instruction offset). The writer thread resolves from those
// copies and never reads Python memory, so a code object freed after the capture is harmless.
//
// Lifecycle: the first capture (on whichever thread) finds CPython with dlsym — never linked — checks
// the version, and either becomes ready or disables Python frames for good with one warning. A
// process without CPython pays one failed lookup and then only a plain load per capture: when a
// libpython is loaded later (an embedding host, RTLD_GLOBAL or RTLD_LOCAL), the writer, which watches
// the loaded objects anyway (under lock_loader_walks), says so with its path (note_module_loaded) and
// the next capture looks again. Nothing here walks the loaded objects, on a hook thread or the
// writer's (fork safety, interpose/recorder/recorder_state.h).
// GPUMEMTRACE_PYTHON=0 is the recorder's business (Config::python_frames): record() then never calls
// capture_python_stack(), so the reader is never even initialised.
#include "interpose/python/python_stack.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "interpose/python/python_code_table.h"
#include "interpose/python/python_eval_ranges.h"
#include "interpose/python/python_offsets.h"
#include "interpose/recorder/recorder.h"

namespace gpumemtrace::python {
namespace {

enum State : int { kUninit = 0, kInitializing, kReady, kNoPython, kDisabled };

struct Runtime {
  const PythonOffsets* off = nullptr;
  void* (*this_thread_state)() = nullptr;  // PyGILState_GetThisThreadState
  int (*is_initialized)() = nullptr;       // Py_IsInitialized
  int (*is_finalizing)() = nullptr;        // _Py_IsFinalizing (3.9-3.12) / Py_IsFinalizing (3.13)
  const void* eval_fn = nullptr;           // _PyEval_EvalFrameDefault
  void* handle = RTLD_DEFAULT;
  // Where the eval loop lives, for the writer's merge (found with the loader's own lookup at init,
  // so the writer never walks the loaded objects): its object's path and load bias, and the exported
  // symbol's extent (the fallback when the object's symbol table cannot be read).
  char eval_object[512] = {};
  uintptr_t eval_bias = 0;
  AddressRange eval_exported{0, 0};
};

std::atomic<int> g_state{kUninit};
// note_module_loaded() calls so far: a try_init() that began before one must not settle on kNoPython.
std::atomic<uint32_t> g_libpython_notes{0};
// The first libpython the writer noted (written once, then published by g_libpython_known): where a
// host that loaded it with RTLD_LOCAL has it. The hook path never walks the loaded objects itself.
char g_libpython_path[512];
std::atomic<bool> g_libpython_known{false};
Runtime g_rt;

constexpr char kLibPythonPrefix[] = "libpython3";

// ---- finding CPython ----

void* sym(const char* name) { return dlsym(g_rt.handle, name); }

void disable(const char* why) {
  if (why) log_line(why);
  g_state.store(kDisabled, std::memory_order_release);
}

// The object holding the eval loop and the loop's exported extent, from the loader (dladdr1).
void locate_eval_fn() {
  Dl_info info;
  void* extra = nullptr;
  if (dladdr1(g_rt.eval_fn, &info, &extra, RTLD_DL_SYMENT) && extra) {
    const auto* symbol = static_cast<const ElfW(Sym)*>(extra);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(g_rt.eval_fn);
    g_rt.eval_exported = AddressRange{begin, begin + symbol->st_size};
  }
  struct link_map* map = nullptr;
  if (dladdr1(g_rt.eval_fn, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) && map) {
    g_rt.eval_bias = map->l_addr;
    snprintf(g_rt.eval_object, sizeof(g_rt.eval_object), "%s",
             map->l_name && map->l_name[0] ? map->l_name : "/proc/self/exe");  // "": the program
  }
}

// Runs on one thread at a time (the others see kInitializing and capture nothing meanwhile): at the
// first capture, and again after the writer noted a libpython loaded. May call dlsym, dladdr, dlopen
// (RTLD_NOLOAD), mmap: the only non-hot-path part of capture.
void try_init() {
  const uint32_t notes = g_libpython_notes.load();
  // Static interpreters (Debian's python3, built with -export-dynamic) and a shared libpython loaded
  // globally both answer here.
  auto get_version = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  if (!get_version && g_libpython_known.load(std::memory_order_acquire)) {
    // A host that dlopen()ed libpython with RTLD_LOCAL: the writer saw it among the loaded objects
    // (its module scan; the first one runs when the recorder starts, so at worst the first events
    // miss their Python frames). The handle is kept: it holds libpython loaded while we use it.
    void* h = dlopen(g_libpython_path, RTLD_NOLOAD | RTLD_LAZY);
    if (h) {
      g_rt.handle = h;
      get_version = reinterpret_cast<const char* (*)()>(dlsym(h, "Py_GetVersion"));
    }
  }
  if (!get_version) {
    g_state.store(kNoPython);
    // A libpython noted while we looked (its note may have found kInitializing): look again.
    int expected = kNoPython;
    if (g_libpython_notes.load() != notes) g_state.compare_exchange_strong(expected, kUninit);
    return;
  }
  const char* version = get_version();
  int major = 0, minor = 0;
  if (!version || sscanf(version, "%d.%d", &major, &minor) != 2) major = minor = 0;
  g_rt.off = python_offsets_for(major, minor);
  char msg[160];
  if (!g_rt.off) {
    snprintf(msg, sizeof(msg),
             "Python %d.%d is not supported for Python frames (3.9 to 3.13); stacks show native frames only",
             major, minor);
    return disable(msg);
  }
  if (sym("_Py_MergeZeroLocalRefcount")) {
    return disable("free-threaded CPython is not supported for Python frames; stacks show native frames only");
  }
  g_rt.this_thread_state = reinterpret_cast<void* (*)()>(sym("PyGILState_GetThisThreadState"));
  g_rt.is_initialized = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
  g_rt.is_finalizing =
      reinterpret_cast<int (*)()>(sym(minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing"));
  g_rt.eval_fn = sym("_PyEval_EvalFrameDefault");
  if (g_rt.eval_fn) locate_eval_fn();
  const void* code_type = sym("PyCode_Type");
  const void* unicode_type = sym("PyUnicode_Type");
  const void* bytes_type = sym("PyBytes_Type");
  if (!g_rt.this_thread_state || !g_rt.is_initialized || !g_rt.is_finalizing || !code_type ||
      !unicode_type || !bytes_type) {
    snprintf(msg, sizeof(msg), "Python %d.%d: interpreter symbols missing; Python frames disabled", major,
             minor);
    return disable(msg);
  }
  if (!code_table_init(g_rt.off, code_type, unicode_type, bytes_type))
    return disable("cannot reserve memory for Python frames; Python frames disabled");
  g_state.store(kReady, std::memory_order_release);
}

// True when capture may proceed. Once settled (ready, no Python, disabled): one plain load.
bool ready() {
  int s = g_state.load(std::memory_order_acquire);
  if (s == kReady) return true;
  if (s != kUninit) return false;
  if (g_state.compare_exchange_strong(s, kInitializing, std::memory_order_acq_rel)) try_init();
  return g_state.load(std::memory_order_acquire) == kReady;
}

inline uintptr_t rd_ptr(uintptr_t a) { return *reinterpret_cast<const uintptr_t*>(a); }
inline int32_t rd_i32(uintptr_t a) { return *reinterpret_cast<const int32_t*>(a); }
inline uint8_t rd_u8(uintptr_t a) { return *reinterpret_cast<const uint8_t*>(a); }

// Ref encoding: a = valid bit 63 | eval group << 32 | code table id; b = instruction byte offset.
constexpr uint64_t kValid = 1ull << 63;
constexpr uint64_t kExternal = 1ull << 62;  // reported after the fact (bridge): b is the line itself
inline PythonFrameRef make_ref(uint32_t id, uint32_t group, int64_t lasti) {
  return PythonFrameRef{kValid | (uint64_t(group & 0xffff) << 32) | id, static_cast<uint64_t>(lasti)};
}
inline uint32_t ref_id(const PythonFrameRef& r) { return static_cast<uint32_t>(r.a); }
inline uint32_t ref_group(const PythonFrameRef& r) { return static_cast<uint32_t>((r.a >> 32) & 0xffff); }

// Outermost frames kept when a stack is deeper than the caller's buffer: the script's own lines
// (train.py's loop) are outermost, so keep them next to the innermost ones.
constexpr int kKeepOutermost = 8;
constexpr int kMaxWalk = 4096;  // guards against a corrupted (cyclic) chain

}  // namespace

int capture_python_stack(PythonFrameRef* out, int max) {
  if (max <= 0) return 0;
  if (!ready()) return 0;
  const Runtime& rt = g_rt;
  if (!rt.is_initialized() || rt.is_finalizing()) return 0;
  uintptr_t ts = reinterpret_cast<uintptr_t>(rt.this_thread_state());
  if (!ts) return 0;
  const PythonOffsets& o = *rt.off;
  uintptr_t frame;
  if (o.tstate_cframe >= 0) {
    uintptr_t cframe = rd_ptr(ts + o.tstate_cframe);
    if (!cframe) return 0;
    frame = rd_ptr(cframe + o.cframe_current);
  } else {
    frame = rd_ptr(ts + o.tstate_frame);
  }

  const int keep_outer = max > 2 * kKeepOutermost ? kKeepOutermost : 0;
  const int direct = max - keep_outer;  // innermost frames stored as found
  PythonFrameRef ring[kKeepOutermost];  // the latest frames beyond `direct`, for the outermost ones
  int n = 0, extra = 0;
  uint32_t group = 0, in_group = 0;
  for (int walked = 0; frame && walked < kMaxWalk; ++walked) {
    uintptr_t code;
    int64_t lasti;
    bool ends_group = false;
    uintptr_t next = rd_ptr(frame + o.frame_back);
    if (o.layout == FrameLayout::kFrameObject) {
      code = rd_ptr(frame + o.frame_code);
      lasti = int64_t(rd_i32(frame + o.frame_lasti)) * o.lasti_scale;
      ends_group = true;  // one native eval frame per Python frame
    } else {
      if (o.layout == FrameLayout::kCStackOwner && rd_u8(frame + o.frame_owner) == kOwnedByCStack) {
        // The shim that starts an eval call: the frames since the last shim were one eval call.
        if (in_group) ++group, in_group = 0;
        frame = next;
        continue;
      }
      code = rd_ptr(frame + o.frame_code);
      uintptr_t instr = rd_ptr(frame + o.frame_lasti);
      lasti = instr ? int64_t(instr) - int64_t(code + o.code_adaptive) : -1;
      if (o.layout == FrameLayout::kIsEntry) ends_group = rd_u8(frame + o.frame_is_entry) != 0;
    }
    uint32_t id = code_table_lookup_or_insert(code);  // 0 for non-code executables: skipped
    if (id) {
      PythonFrameRef ref = make_ref(id, group, lasti);
      if (n < direct) out[n++] = ref;
      else if (keep_outer) ring[extra++ % keep_outer] = ref;
    }
    ++in_group;
    if (ends_group) ++group, in_group = 0;
    frame = next;
  }
  if (extra > 0) {
    int take = extra < keep_outer ? extra : keep_outer;
    for (int i = extra - take; i < extra; ++i) out[n++] = ring[i % keep_outer];
  }
  return n;
}

// ---- writer side ----

namespace {
std::once_flag g_ranges_once;
std::vector<AddressRange> g_eval_ranges;

bool is_eval_ip(uintptr_t ip) {
  uintptr_t at = ip - 1;  // return addresses point past the call
  for (const AddressRange& r : g_eval_ranges)
    if (at >= r.begin && at < r.end) return true;
  return false;
}
}  // namespace

void merge_stacks(const uintptr_t* native, int native_depth, const PythonFrameRef* refs, int python_depth,
                  std::vector<MergedFrame>* out) {
  out->clear();
  if (python_depth <= 0) {
    for (int i = 0; i < native_depth; ++i) out->push_back(MergedFrame{false, native[i], -1});
    return;
  }
  // Captured refs exist only once the reader is ready; refs reported as text (the PyTorch bridge)
  // come without native frames, whatever the reader's state: they are the whole stack.
  if (native_depth > 0)
    std::call_once(g_ranges_once, [] {
      g_eval_ranges = find_eval_ranges(g_rt.eval_object, g_rt.eval_bias, g_rt.eval_exported);
    });
  uint32_t groups = ref_group(refs[python_depth - 1]) + 1;
  int next_ref = 0;
  auto emit_group = [&](uint32_t g) {
    while (next_ref < python_depth && ref_group(refs[next_ref]) <= g) {
      out->push_back(MergedFrame{true, 0, next_ref});
      ++next_ref;
    }
  };
  // Eval frame k (innermost first) stands for Python group k: replace it with that group's frames.
  uint32_t seen = 0;
  for (int i = 0; i < native_depth; ++i) {
    if (seen < groups && is_eval_ip(native[i])) {
      emit_group(seen++);
      continue;
    }
    out->push_back(MergedFrame{false, native[i], -1});
  }
  // Native stack truncated (or eval frames not found): the remaining, outer Python frames go last.
  emit_group(groups);
}

bool resolve_python_frame(const PythonFrameRef& ref, PythonFrame* out) {
  if (!(ref.a & kValid)) return false;
  CodeInfo info;
  if (!code_table_get(ref_id(ref), &info)) return false;
  out->function.assign(info.function, info.function_len);
  out->file.assign(info.file, info.file_len);
  out->line = (ref.a & kExternal) ? static_cast<int>(ref.b)
                                   : code_table_line(ref_id(ref), static_cast<int64_t>(ref.b));
  return true;
}

uint64_t python_frame_key(const PythonFrameRef& ref) {
  // (table id, line): equal keys resolve equally. The writer calls this only for captures it has not
  // seen before (it keys stacks by the raw capture first), so the line decode needs no cache here.
  int line = !(ref.a & kValid)    ? 0
             : (ref.a & kExternal) ? static_cast<int>(ref.b)
                                   : code_table_line(ref_id(ref), static_cast<int64_t>(ref.b));
  return (uint64_t(ref_id(ref)) << 32) | static_cast<uint32_t>(line);
}

void note_module_loaded(const char* path) {
  const char* base = path ? strrchr(path, '/') : nullptr;
  base = base ? base + 1 : path;
  if (!base || strncmp(base, kLibPythonPrefix, sizeof(kLibPythonPrefix) - 1) != 0) return;
  if (!g_libpython_known.load(std::memory_order_relaxed) && strlen(path) < sizeof(g_libpython_path)) {
    memcpy(g_libpython_path, path, strlen(path) + 1);  // writer thread only; published once, below
    g_libpython_known.store(true, std::memory_order_release);
  }
  g_libpython_notes.fetch_add(1);
  int expected = kNoPython;
  g_state.compare_exchange_strong(expected, kUninit);
}

// ---- external frames ----

bool make_external_frame(const char* file, size_t file_len, const char* function, size_t function_len,
                         int64_t line, PythonFrameRef* out) {
  const uint32_t id = code_table_insert_external(file, file_len, function, function_len);
  if (!id) return false;
  *out = PythonFrameRef{kValid | kExternal | id, static_cast<uint64_t>(line < 0 ? 0 : line > INT32_MAX ? INT32_MAX : line)};
  return true;
}

}  // namespace gpumemtrace::python
