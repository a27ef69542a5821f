// interpose/recorder/config.h — the recorder's settings, read once from the environment.
// docs/configuration.md lists every variable with its default; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "interpose/recorder/unwind.h"

namespace gpumemtrace {

// Every GPUMEMTRACE_* variable, in one list: those the recorder reads, and those of the other parts that
// reach a traced program's environment (the PyTorch hook, the pytest plugin, the launcher, the
// simulated CUDA runtime and driver, the test harness). docs/configuration.md describes each. The
// recorder reads its own through the names below (var::kOutput, ...); at start-up any other
// GPUMEMTRACE_ name in the environment gets one warning (warn_unknown_variables).
#define GPUMEMTRACE_VARIABLES(X)                                                                         \
  /* the recorder */                                                                                     \
  X(kOutput, "GPUMEMTRACE_OUTPUT") X(kStackDepth, "GPUMEMTRACE_STACK_DEPTH")                             \
  X(kOnFull, "GPUMEMTRACE_ON_FULL") X(kRingEvents, "GPUMEMTRACE_RING_EVENTS")                            \
  X(kMaxBytes, "GPUMEMTRACE_MAX_BYTES") X(kFlushMs, "GPUMEMTRACE_FLUSH_MS")                              \
  X(kKeep, "GPUMEMTRACE_KEEP")                                                                           \
  X(kSymbolize, "GPUMEMTRACE_SYMBOLIZE") X(kExitTimeoutMs, "GPUMEMTRACE_EXIT_TIMEOUT_MS")                \
  X(kQuiet, "GPUMEMTRACE_QUIET") X(kVerbose, "GPUMEMTRACE_VERBOSE")                                     \
  X(kFreeStacks, "GPUMEMTRACE_FREE_STACKS")                                                              \
  X(kUnwind, "GPUMEMTRACE_UNWIND") X(kInternStacks, "GPUMEMTRACE_INTERN_STACKS")                         \
  X(kDisable, "GPUMEMTRACE_DISABLE") X(kBackend, "GPUMEMTRACE_BACKEND")                                  \
  X(kCuptiPath, "GPUMEMTRACE_CUPTI_PATH") X(kDriverStats, "GPUMEMTRACE_DRIVER_STATS")                    \
  X(kNvtx, "GPUMEMTRACE_NVTX") X(kPython, "GPUMEMTRACE_PYTHON")                                          \
  /* the PyTorch hook and the pytest plugin (tools/python) */                                            \
  X(kTorch, "GPUMEMTRACE_TORCH") X(kTorchEntries, "GPUMEMTRACE_TORCH_ENTRIES")                           \
  X(kTorchPollMs, "GPUMEMTRACE_TORCH_POLL_MS") X(kPytest, "GPUMEMTRACE_PYTEST")                          \
  X(kPytestCheckFailed, "GPUMEMTRACE_PYTEST_CHECK_FAILED")                                               \
  X(kPytestGc, "GPUMEMTRACE_PYTEST_GC") X(kPytestSummary, "GPUMEMTRACE_PYTEST_SUMMARY")                  \
  X(kPytestGate, "GPUMEMTRACE_PYTEST_GATE")                                                              \
  /* the launcher (tools/gpumemtrace.cpp) */                                                             \
  X(kLibrary, "GPUMEMTRACE_LIBRARY") X(kReport, "GPUMEMTRACE_REPORT")                                    \
  /* the simulated CUDA runtime and driver (tests/sim), the test harness (tests/run_tests.py, tests/gpu) */ \
  X(kSimCapacity, "GPUMEMTRACE_SIM_CAPACITY") X(kSimDevices, "GPUMEMTRACE_SIM_DEVICES")                  \
  X(kSimNoDevice, "GPUMEMTRACE_SIM_NO_DEVICE") X(kBuild, "GPUMEMTRACE_BUILD")                            \
  X(kTestPreload, "GPUMEMTRACE_TEST_PRELOAD") X(kFuzzBriefSeconds, "GPUMEMTRACE_FUZZ_BRIEF_SECONDS")     \
  X(kGpuChecksHome, "GPUMEMTRACE_HOME")

namespace var {
#define GPUMEMTRACE_VARIABLE_NAME(id, text) inline constexpr char id[] = text;
GPUMEMTRACE_VARIABLES(GPUMEMTRACE_VARIABLE_NAME)
#undef GPUMEMTRACE_VARIABLE_NAME
}  // namespace var

#define GPUMEMTRACE_VARIABLE_ENTRY(id, text) var::id,
inline constexpr const char* kKnownVariables[] = {GPUMEMTRACE_VARIABLES(GPUMEMTRACE_VARIABLE_ENTRY)};
#undef GPUMEMTRACE_VARIABLE_ENTRY

// Secure-execution mode (the kernel's AT_SECURE: a setuid or setgid program, file capabilities, an
// LSM transition): the environment belongs to whoever started the program, not to the program. Every
// GPUMEMTRACE_* variable is ignored then (and CUDA_HOME where the recorder would load a library from
// it), as glibc ignores LD_LIBRARY_PATH and the paths in LD_PRELOAD: defaults apply (docs/security.md).
bool secure_execution() noexcept;

// getenv(name) for the recorder's settings, and every other variable it takes a path from: null in
// secure-execution mode. Every such read in interpose/ and cupti/ goes through it.
const char* recorder_getenv(const char* name) noexcept;

// Warns once per name, through `warn`, about each "NAME=VALUE" of `env` (a null-terminated array, such
// as environ) whose NAME starts with GPUMEMTRACE_ but is not in kKnownVariables: most likely a typo
// that silently leaves a setting at its default. Names the closest known variable when there is one
// (closest_known_variable).
void warn_unknown_variables(const char* const* env, void (*warn)(const char*));

// The known variable nearest to `name` when at most two edits (insertions, deletions, substitutions,
// transpositions of neighbours) away, else null. Ties go to the earlier entry of kKnownVariables.
const char* closest_known_variable(const char* name);

enum class OnFull { Wait, Drop };

// Who says where a trace goes ("writing trace to ..."). Auto: only a process whose stderr is a
// terminal and whose parent is not traced (the one a person started); a child process, whose stderr a
// test may be comparing, says nothing unless something is wrong. On: every process. Off: none (the
// launcher says it once itself). GPUMEMTRACE_QUIET=1 silences it whatever this says.
enum class Verbosity { Auto, On, Off };

// The trace's name when GPUMEMTRACE_OUTPUT gives none (unset, or a directory): zstd-compressed
// (the writer compresses a name ending in .zst), about 20 times smaller than the text.
inline constexpr const char* kDefaultTraceName = "gpumemtrace.%e.%p.jsonl.zst";

struct Config {
  bool disabled = false;                                  // GPUMEMTRACE_DISABLE
  std::string output = kDefaultTraceName;                 // GPUMEMTRACE_OUTPUT (template)
  // The user named one literal path (no %-placeholder, not a directory): only such a path may be an
  // existing FIFO or device (/dev/stdout). Generated names are always new regular files.
  bool output_named = false;
  int stack_depth = 64;                                   // GPUMEMTRACE_STACK_DEPTH, 0..kMaxNativeFrames
  bool free_stacks = false;                               // GPUMEMTRACE_FREE_STACKS
  UnwindMode unwind = UnwindMode::Auto;                   // GPUMEMTRACE_UNWIND
  bool intern_stacks = true;                              // GPUMEMTRACE_INTERN_STACKS
  OnFull on_full = OnFull::Wait;                          // GPUMEMTRACE_ON_FULL
  size_t ring_events = 16384;                             // GPUMEMTRACE_RING_EVENTS (power of two)
  int flush_ms = 100;                                     // GPUMEMTRACE_FLUSH_MS, 1..100
  bool symbolize = true;                                  // GPUMEMTRACE_SYMBOLIZE
  bool python_frames = true;                              // GPUMEMTRACE_PYTHON (auto = on)
  bool quiet = false;                                     // GPUMEMTRACE_QUIET
  Verbosity verbose = Verbosity::Auto;                    // GPUMEMTRACE_VERBOSE
  int exit_timeout_ms = 5000;                             // GPUMEMTRACE_EXIT_TIMEOUT_MS
  // GPUMEMTRACE_MAX_BYTES: the trace size cap. Unset: 10% of the free space of the trace's file
  // system at start, clamped to [1 GiB, 64 GiB] (resolved by the writer, trace_cap_bytes).
  // "0": no cap.
  bool max_bytes_default = true;
  uint64_t max_bytes = 0;
  // GPUMEMTRACE_KEEP (util/keep.h): the flight recorder (interpose/writer/flight.cpp). The trace is written as
  // rotating segments, and what is kept is at least this much of the run's end: a duration
  // (keep_ns) or a size of trace text on disk (keep_bytes). Both 0: off (everything is kept).
  uint64_t keep_ns = 0;
  uint64_t keep_bytes = 0;
};


// The smallest cap accepted: room for the header, module lines and a few events.
inline constexpr uint64_t kMinTraceCapBytes = 64 * 1024;

// The default cap for a trace whose file system has `free_bytes` available (10%, clamped to
// [1 GiB, 64 GiB]); `known` false (the file system could not be asked): 8 GiB.
uint64_t default_trace_cap(uint64_t free_bytes, bool known);

// Reads `getenv_fn(name)` for every setting. A bad value produces one warning line through `warn` and
// the default. `getenv_fn` is a parameter so that tests can feed settings without touching the
// environment.
Config parse_config(const char* (*getenv_fn)(const char*), void (*warn)(const char*));

// GPUMEMTRACE_NVTX: whether the library makes itself the program's NVTX injection (hooks/nvtx.cpp).
// Auto: when no other tool is (NVTX_INJECTION64_PATH unset), silently. On: the same, and one stderr
// line when another tool holds NVTX. Off: never. Read on its own, at load time, before the recorder
// starts (the program's first NVTX call may come before its first CUDA memory call).
enum class NvtxMode { Auto, On, Off };
NvtxMode parse_nvtx_mode(const char* value, void (*warn)(const char*));

// Expands an output template: %p -> pid, %e -> executable's base name, %% -> %. A template ending in
// '/' is a directory: the default file name is appended. A `.zst` suffix selects zstd compression.
std::string expand_output_path(const std::string& tmpl, long pid, const std::string& exe_name);

}  // namespace gpumemtrace
