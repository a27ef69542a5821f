// tests/python/probe/python_stack_probe.cpp — a test-only shared library around python_stack.h, loaded
// with ctypes by tests/python/test_python_stacks.py and bench/python_stack_bench.py. It plays the
// recorder's two roles: "hook" (capture on the calling thread, usually without the GIL) and "writer"
// (merge with a native backtrace and resolve, later, possibly after the Python code is gone).
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/python/python_code_table.h"
#include "interpose/python/python_stack.h"
#include "interpose/recorder/recorder.h"
#include "util/monotonic_clock.h"

namespace gpumemtrace {
// The recorder's logger, for this test library only.
void log_line(const char* msg) noexcept {
  char buf[512];
  int n = snprintf(buf, sizeof(buf), "gpumemtrace: %s\n", msg);
  if (n > 0) (void)!write(2, buf, n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1);
}
}  // namespace gpumemtrace

using namespace gpumemtrace::python;

namespace {
std::mutex g_writer;  // the writer-side functions are single-threaded by contract

struct Stored {
  PythonFrameRef refs[kMaxPythonFrames];
  int depth = 0;
  uintptr_t native[64];
  int native_depth = 0;
};
Stored g_store[64];

std::string format(const uintptr_t* native, int nd, const PythonFrameRef* refs, int pd) {
  std::lock_guard<std::mutex> lock(g_writer);
  std::vector<MergedFrame> merged;
  merge_stacks(native, nd, refs, pd, &merged);
  std::string s;
  char line[1024];
  for (const MergedFrame& m : merged) {
    if (m.is_python) {
      PythonFrame f;
      if (!resolve_python_frame(refs[m.python_index], &f)) {
        s += "P ?\n";
        continue;
      }
      snprintf(line, sizeof(line), "P %s %s %d %016llx\n", f.function.c_str(), f.file.c_str(), f.line,
               (unsigned long long)python_frame_key(refs[m.python_index]));
    } else {
      Dl_info info;
      const char* name = (dladdr(reinterpret_cast<void*>(m.ip - 1), &info) && info.dli_sname) ? info.dli_sname : "?";
      snprintf(line, sizeof(line), "N %s\n", name);
    }
    s += line;
  }
  return s;
}

int copy_out(const std::string& s, char* buf, int len) {
  if (len <= 0) return -1;
  int n = (int)s.size() < len - 1 ? (int)s.size() : len - 1;
  memcpy(buf, s.data(), n);
  buf[n] = 0;
  return n;
}

__attribute__((noinline)) int capture_into(Stored* st) {
  st->depth = capture_python_stack(st->refs, kMaxPythonFrames);
  void* bt[64];
  st->native_depth = backtrace(bt, 64);
  for (int i = 0; i < st->native_depth; ++i) st->native[i] = reinterpret_cast<uintptr_t>(bt[i]);
  return st->depth;
}
}  // namespace

extern "C" {

// Capture now, merge + resolve now; writes the merged stack ("P func file line key" / "N symbol"
// lines, innermost first) into buf. Returns the number of Python frames captured.
int gpumemtrace_probe_stack(char* buf, int len) {
  Stored st;
  int n = capture_into(&st);
  copy_out(format(st.native, st.native_depth, st.refs, st.depth), buf, len);
  return n;
}

// Capture into slot `i` now; resolve later with gpumemtrace_probe_resolve.
int gpumemtrace_probe_store(int i) {
  if (i < 0 || i >= 64) return -1;
  return capture_into(&g_store[i]);
}

int gpumemtrace_probe_resolve(int i, char* buf, int len) {
  if (i < 0 || i >= 64) return -1;
  const Stored& st = g_store[i];
  return copy_out(format(st.native, st.native_depth, st.refs, st.depth), buf, len);
}

// Capture with a caller-chosen buffer size; returns the depth (tests the outermost-frames rule).
int gpumemtrace_probe_depth(int max, char* buf, int len) {
  PythonFrameRef refs[kMaxPythonFrames];
  if (max > kMaxPythonFrames) max = kMaxPythonFrames;
  int n = capture_python_stack(refs, max);
  std::string s;
  std::lock_guard<std::mutex> lock(g_writer);
  for (int i = 0; i < n; ++i) {
    PythonFrame f;
    if (resolve_python_frame(refs[i], &f)) s += f.function + ":" + std::to_string(f.line) + "\n";
  }
  copy_out(s, buf, len);
  return n;
}

// ns per capture_python_stack() call at the current Python depth, over `iters` calls.
double gpumemtrace_probe_bench(int iters) {
  PythonFrameRef refs[kMaxPythonFrames];
  int sink = 0;
  capture_python_stack(refs, kMaxPythonFrames);  // warm the code table
  const uint64_t start = gpumemtrace::util::monotonic_ns();
  for (int i = 0; i < iters; ++i) sink += capture_python_stack(refs, kMaxPythonFrames);
  const uint64_t end = gpumemtrace::util::monotonic_ns();
  asm volatile("" : : "r"(sink));
  return static_cast<double>(end - start) / iters;
}

// ns per writer-side resolution (merge + key + resolve) of the last stored slot 0.
double gpumemtrace_probe_bench_resolve(int iters) {
  const Stored& st = g_store[0];
  std::vector<MergedFrame> merged;
  PythonFrame f;
  uint64_t sink = 0;
  const uint64_t start = gpumemtrace::util::monotonic_ns();
  for (int i = 0; i < iters; ++i) {
    merge_stacks(st.native, st.native_depth, st.refs, st.depth, &merged);
    for (int j = 0; j < st.depth; ++j) {
      sink += python_frame_key(st.refs[j]);
      if (resolve_python_frame(st.refs[j], &f)) sink += f.line;
    }
  }
  const uint64_t end = gpumemtrace::util::monotonic_ns();
  asm volatile("" : : "r"(sink));
  return static_cast<double>(end - start) / iters;
}

unsigned long long gpumemtrace_probe_code_entries() { return code_table_entries(); }

}  // extern "C"
