// interpose/hooks/custom_api.cpp — the library side of include/gpumemtrace.h: a caching allocator's
// own sub-allocations, the program's phase markers and named scopes, recorded like any other event
// (same ring, same sequence, stacks of the caller); and the garbage collections the pytest plugin
// reports (gpumemtrace_report_gc).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "interpose/recorder/program_strings.h"
#include "interpose/recorder/event_record.h"
#include "interpose/recorder/label_table.h"
#include "interpose/recorder/recorder.h"
#include "util/monotonic_clock.h"

using gpumemtrace::HookScope;
namespace f = gpumemtrace::format;

namespace {

void report_block(f::Op op, const char* api, const void* ptr, size_t size, const void* segment, int device,
                  const char* pool) {
  HookScope scope;
  if (!scope.recording()) return;
  // The pool's name is the program's pointer: read without faulting, as far as it goes (program_strings.h).
  char pool_copy[gpumemtrace::kPoolNameBytes];
  gpumemtrace::record(gpumemtrace::event::block(op, api, reinterpret_cast<uint64_t>(ptr), size,
                                                reinterpret_cast<uint64_t>(segment), device,
                                                gpumemtrace::copy_program_string(pool, pool_copy, sizeof pool_copy)));
}

// A mark or a scope event: no memory, a text (the mark's label, the scope's name); `result` nonzero
// on a scope_end whose work failed.
void report_labelled(f::Op op, const char* label, const char* api, int32_t result = 0) {
  // A copy read without faulting (program_strings.h), one byte longer than a scope name is kept, so
  // that the recorder still sees a name it must cut.
  char copy[gpumemtrace::kMaxScopeNameBytes + 2];
  gpumemtrace::record_labelled(op, label ? gpumemtrace::copy_program_string(label, copy, sizeof copy) : "", api, 0,
                               result);
}

// `api` must be static for the recorder (it keeps the pointer): the openers docs/trace-format.md
// names map onto ours; any other text becomes "gpumemtrace_scope".
const char* static_scope_api(const char* api) {
  static const char* const kApis[] = {"gpumemtrace_scope", "gpumemtrace.scope", "pytest", "torch.backward"};
  if (api)
    for (const char* known : kApis)
      if (strcmp(api, known) == 0) return known;
  return kApis[0];
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void gpumemtrace_report_block_alloc(const void* ptr, size_t size,
                                                                           const void* segment, int device,
                                                                           const char* pool) {
  report_block(f::Op::BlockAlloc, "gpumemtrace_block_alloc", ptr, size, segment, device, pool);
}

__attribute__((visibility("default"))) void gpumemtrace_report_block_free(const void* ptr, size_t size,
                                                                          const void* segment, int device,
                                                                          const char* pool) {
  report_block(f::Op::BlockFree, "gpumemtrace_block_free", ptr, size, segment, device, pool);
}

__attribute__((visibility("default"))) void gpumemtrace_report_block_oom(size_t size, int device, const char* pool) {
  report_block(f::Op::BlockOom, "gpumemtrace_block_oom", nullptr, size, nullptr, device, pool);
}

__attribute__((visibility("default"))) void gpumemtrace_report_mark(const char* label) {
  report_labelled(f::Op::Mark, label, "gpumemtrace_mark");
}

// Named scopes (a test, a phase): begin/end events carrying the name and the caller's stack. The
// analyzer pairs an end with the innermost open scope of the same name; nothing is checked here.
__attribute__((visibility("default"))) void gpumemtrace_report_scope_begin(const char* name) {
  report_labelled(f::Op::ScopeBegin, name, "gpumemtrace_scope");
}

__attribute__((visibility("default"))) void gpumemtrace_report_scope_end(const char* name) {
  report_labelled(f::Op::ScopeEnd, name, "gpumemtrace_scope");
}

// For language bindings that say who opened the scope (tools/python/gpumemtrace: "gpumemtrace.scope",
// "pytest", "torch.backward"): end 0 opens it, 1 closes it, N >= 2 closes it with result N - 1, the
// bits of trace/format.h (kScopeFailed: 2 says that the work inside failed, a pytest test that failed
// or errored, which gpumem-report does not check; the pytest plugin's limits; docs/trace-format.md,
// "Scopes").
__attribute__((visibility("default"))) void gpumemtrace_report_scope(int end, const char* name,
                                                                     const char* api) {
  report_labelled(end ? f::Op::ScopeEnd : f::Op::ScopeBegin, name, static_scope_api(api), end >= 2 ? end - 1 : 0);
}

// Control (include/gpumemtrace.h; tools/python/gpumemtrace: start(), stop(), dump()). Pausing keeps
// every event and drops its stack (interpose/recorder/pause.h): 1 when the state changed, 0 when it
// already was so, -1 when the recorder is off.
__attribute__((visibility("default"))) int gpumemtrace_report_pause(void) { return gpumemtrace::set_paused(true); }

__attribute__((visibility("default"))) int gpumemtrace_report_resume(void) { return gpumemtrace::set_paused(false); }

// Seals the trace so far into `path` (null or "": beside the trace, its name with "-dump"), waiting at
// most `timeout_ms` (recorder.h, dump_trace): 0 when written, 1 when not, 2 when nothing is recorded
// yet, -1 when the recorder is off. `message` (`size` bytes, may be null) gets the path written or
// why not, cut to fit.
__attribute__((visibility("default"))) int gpumemtrace_report_dump(const char* path, int timeout_ms, char* message,
                                                                   size_t size) {
  std::string text;
  char path_copy[4096];  // the program's string, read without faulting (program_strings.h)
  int rc = 1;
  if (path && gpumemtrace::program_strnlen(path, sizeof path_copy) >= sizeof path_copy) {
    text = "the dump's path is longer than " + std::to_string(sizeof path_copy - 1) + " bytes";
  } else {
    const char* asked = path ? gpumemtrace::copy_program_string(path, path_copy, sizeof path_copy) : "";
    rc = gpumemtrace::dump_trace(asked, timeout_ms > 0 ? timeout_ms : 1, &text);
  }
  if (message && size) {
    const size_t n = std::min(text.size(), size - 1);
    memcpy(message, text.data(), n);
    message[n] = '\0';
  }
  return rc;
}

// A garbage collection of the program's language runtime that freed objects, reported when it ends
// (the pytest plugin's gc.callbacks, tools/python/gpumemtrace_pytest.py): it began at `began_ns`
// (CLOCK_MONOTONIC, the clock of every trace time; Python's time.monotonic_ns() reads it on Linux)
// and ends now, on this thread. A "gc" record (docs/trace-format.md): gpumem-report does not count as
// a test's leak what was still live at the test's end and was freed inside it (cyclic garbage).
// Returns 1 when recorded, 0 when not (the recorder is off), -1 when refused (0, or a start not yet
// reached: the record's end is taken after the check, so it is never before its start).
__attribute__((visibility("default"))) int gpumemtrace_report_gc(uint64_t began_ns) {
  if (began_ns == 0 || began_ns > gpumemtrace::util::monotonic_ns()) return -1;
  HookScope scope;
  if (!scope.recording()) return 0;
  return gpumemtrace::record(gpumemtrace::event::gc_window(began_ns)) ? 1 : 0;
}

}  // extern "C"
