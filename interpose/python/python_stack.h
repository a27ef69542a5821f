// interpose/python/python_stack.h — Python frames in native stacks.
//
// Two halves with different rules:
//  - capture_python_stack() runs on the hook's hot path, in the allocating thread, usually WITHOUT the
//    GIL (PyTorch releases it around its allocator). No malloc, no lock, no stdio, never takes the GIL.
//    It stores opaque references (PythonFrameRef) into the ring slot.
//  - resolve/merge run in the writer thread, off the hot path: they turn references into
//    function/file/line and splice them into the native stack where the interpreter's eval frames are.
// When Python is not present (or the version is unknown) capture returns 0 and nothing else happens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpumemtrace::python {

inline constexpr int kMaxPythonFrames = 32;

// Opaque to the recorder and the writer; only python_stack.cpp gives it meaning.
struct PythonFrameRef {
  uint64_t a;
  uint64_t b;
};

// Hot path. Fills at most `max` references for the calling thread, innermost first. Returns the count.
int capture_python_stack(PythonFrameRef* out, int max);

// Writer thread: an object was loaded (path as the loader has it); called for every object seen for
// the first time (the first scan included). A libpython appearing in a process where the frame reader
// found no CPython makes the next capture look again, at that path (a libpython loaded with
// RTLD_LOCAL is invisible to dlsym(RTLD_DEFAULT)). Cheap; never walks the loaded objects itself.
void note_module_loaded(const char* path);

// Writer thread only (not thread-safe). A resolved Python frame.
struct PythonFrame {
  std::string function;
  std::string file;
  int line = 0;
};

// One logical frame of a merged stack: either a native instruction pointer or a Python frame index.
struct MergedFrame {
  bool is_python = false;
  uintptr_t ip = 0;        // native
  int python_index = -1;   // index into the refs passed to merge_stacks
};

// Writer thread only. Splices the Python frames into the native stack (innermost first), replacing the
// interpreter's eval frames. Without Python frames the result is the native stack unchanged; without
// native frames (events reported late with their own frames, EventFacts::frames) it is the Python
// frames alone.
void merge_stacks(const uintptr_t* native, int native_depth, const PythonFrameRef* refs, int python_depth,
                  std::vector<MergedFrame>* out);

// Writer thread only. Resolves one reference; false when it cannot be resolved (then it is skipped).
bool resolve_python_frame(const PythonFrameRef& ref, PythonFrame* out);

// Writer thread only: a stable key identifying the code location of `ref` (for interning frames).
// Two refs with equal keys resolve to the same PythonFrame.
uint64_t python_frame_key(const PythonFrameRef& ref);

// ---- Frames reported after the fact (the PyTorch bridge, interpose/hooks/torch_bridge.cpp) ----

// Builds the reference of one frame given as strings (file and function, not NUL-terminated; a
// negative line counts as 0). Any thread; copies the strings into the code table (same bounds as
// captured frames). False when the table is full (then the frame is left out). The references of an
// event's frames, innermost first, are its whole stack (EventFacts::frames). Independent of the frame
// reader: works with GPUMEMTRACE_PYTHON=0 and in processes whose interpreter is not supported.
bool make_external_frame(const char* file, size_t file_len, const char* function, size_t function_len,
                         int64_t line, PythonFrameRef* out);

}  // namespace gpumemtrace::python
