// trace/format.h — the gpumemtrace timeline format, shared by the writer (interpose/writer) and the
// reader (report/). One header so that the two sides cannot drift apart: every record type, field
// name, operation and memory kind that appears in a trace is spelled here exactly once.
//
// The format is JSON Lines (docs/trace-format.md is the prose version of this file):
//   line 1        {"type":"header", "format":"gpumemtrace", "version":2, ...}
//   then, in any interleaving, in causal order (a record only refers to ids defined on earlier lines):
//                 {"type":"module", ...}   a loaded ELF object (re-emitted after dlopen)
//                 {"type":"frame", ...}    one unique code location (native ip or Python code+line)
//                 {"type":"stack", ...}    one unique call stack = list of frame ids, innermost first
//                 {"type":"site", ...}     what events repeat: thread, api, op, kind, device, stack
//                 {"type":"device", ...}   device facts (name, total, free) when known
//                 {"e":SITE, "t":DT, ...}  one memory event (no "type"): its site, the time since
//                                          the previous event line, what differs per event
//                 {"type":"dropped", ...}  events lost because the ring was full in drop mode
//                 {"type":"capped", ...}   the trace reached GPUMEMTRACE_MAX_BYTES: no event line
//                                          follows (definitions, devices and drops still may)
//                 {"type":"live", ...}     after "capped", at the end: one per allocation still live
//                 {"type":"allocator_settings", ...}  PyTorch's caching-allocator settings in force, or
//                                          changed, at its seq and t (a record of its own, not an
//                                          event line: readers that do not know it skip it)
//                 {"type":"gc", ...}       a garbage collection of the program's language runtime
//                                          (Python's) that freed objects: from t to end_time
//                 {"type":"pause", ...}    from here to the next "resume" record, events carry no
//                 {"type":"resume", ...}   stack (gpumemtrace_pause(), Python's gpumemtrace.stop())
//   last line     {"type":"footer", ...}   how the process ended ("end": exit, _exit, signal, exec,
//                                          or dump: a running process's trace sealed by a dump);
//                                          its absence means the process died otherwise
//
// Invariants the reader may rely on (the writer guarantees them; docs/trace-format.md repeats them):
//  - "seq" of events strictly increases line by line within one file (the ring's total order); an
//    event line carries it ("q") only when it is not the previous event's seq + 1.
//    Events marked "delayed":true were reported after the fact (PyTorch's allocation history): their
//    seq is the report's, their t the moment they happened. A "sync" event at t = D promises that
//    every delayed event with t <= D is on an earlier line: the timeline is the live events merged
//    with the delayed ones by t (report/reader/event_merger.h).
//  - Addresses, instruction pointers, streams and pools are strings "0x..." (64-bit values do not
//    survive JSON readers that use doubles, such as jq and JavaScript). Sizes are integers < 2^53.
//  - A stack/frame/module/site id is defined before the first line that uses it. Site ids count
//    1, 2, 3... in the order of their records (a reader may keep sites in an array).
//  - A process killed mid-run leaves a truncated last line; everything before it is valid.
//
// Thread-safety: constants only.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpumemtrace::format {

inline constexpr const char* kFormatName = "gpumemtrace";
// Version 2 (written by the recorder) differs from version 1 only in how events are written: the
// fields every event of one call site repeats are a "site" record, and an event line carries its
// site id, a time delta and what differs per event (short keys below). Readers read both; the
// PyTorch snapshot import still writes version 1.
inline constexpr int kVersion1 = 1;
inline constexpr int kVersion2 = 2;
inline constexpr int kVersion = kVersion2;

// ---- files beside a trace ----
// `gpumemtrace dump PID` (tools/dump.cpp) asks the running program's writer thread
// (interpose/writer/trace_dump.cpp) for a dump through TRACE + kDumpRequestSuffix, holding the dump's
// path; the answer comes back in TRACE + kDumpResultSuffix ("ok PATH" or "error WHY").
inline constexpr const char* kDumpRequestSuffix = ".dump-request";
inline constexpr const char* kDumpResultSuffix = ".dump-result";

// ---- record types ("type" field) ----
inline constexpr const char* kFieldType = "type";  // every record: one of the kType* below
inline constexpr const char* kTypeHeader = "header";
inline constexpr const char* kTypeModule = "module";
inline constexpr const char* kTypeFrame = "frame";
inline constexpr const char* kTypeStack = "stack";
inline constexpr const char* kTypeDevice = "device";
inline constexpr const char* kTypeEvent = "event";  // version 1 event lines (v2: see kFieldEventSite)
inline constexpr const char* kTypeDropped = "dropped";
inline constexpr const char* kTypeCapped = "capped";  // seq (first event not written), t, size, max_bytes
inline constexpr const char* kTypeLive = "live";      // an allocation live at the end of a capped trace:
                                                      // the fields of its alloc/block_alloc event
inline constexpr const char* kTypeFooter = "footer";
inline constexpr const char* kTypeSite = "site";      // version 2: id, tid, api, driver_api, op,
                                                      // kind, device, stack, delayed
// PyTorch's caching-allocator settings (docs/trace-format.md, "allocator_settings"): seq, t, tid,
// source, device, and conf (PYTORCH_CUDA_ALLOC_CONF syntax) or fraction. Absolute seq and t, like
// "live": it does not move the event lines' deltas. Added within version 2 (unknown record types are
// skipped by every reader of version 2).
inline constexpr const char* kTypeAllocatorSettings = "allocator_settings";
// A garbage collection that freed objects (docs/trace-format.md, "gc"), reported by the pytest plugin
// through gpumemtrace_report_gc(): seq (when it was reported, at its end), t (when it began), end_time
// (when it ended), tid (the collecting thread). What was freed between t and end_time on that thread
// was freed by the collector: cyclic garbage, not memory a program held on purpose. Added within
// version 2, like allocator_settings.
inline constexpr const char* kTypeGc = "gc";
// Stacks paused and resumed (docs/trace-format.md, "pause"): gpumemtrace_pause() / _resume() (Python's
// gpumemtrace.stop() / start()) at seq and t, on thread tid. Events recorded between a "pause" and
// the next "resume" (or the trace's end) carry no stack; every event is still recorded, so what is
// live stays exact. Added within version 2, like gc.
inline constexpr const char* kTypePause = "pause";
inline constexpr const char* kTypeResume = "resume";

// ---- event operations ("op" field of an event) ----
// Each op says what happened to the address range [addr, addr+size).
#define GPUMEMTRACE_OPS(X)                                                                        \
  X(Alloc, "alloc")            /* memory obtained from CUDA; result!=0 means it failed (OOM) */  \
  X(Free, "free")              /* memory returned to CUDA (recorded before the real free)   */  \
  X(BlockAlloc, "block_alloc") /* a caching allocator handed out a block inside a segment   */  \
  X(BlockFree, "block_free")   /* ... and took it back (the segment stays reserved)         */  \
  X(BlockOom, "block_oom")     /* a caching allocator failed to satisfy a request           */  \
  X(Map, "map")                /* physical allocation (handle) mapped at a virtual range    */  \
  X(Unmap, "unmap")            /* virtual range unmapped                                    */  \
  X(Reserve, "reserve")        /* virtual address range reserved (no physical memory)       */  \
  X(Unreserve, "unreserve")    /* virtual address range released                            */  \
  X(Trim, "trim")              /* memory pool trimmed down to size bytes                    */  \
  X(Reset, "reset")            /* device reset / context destroyed: every allocation of     */  \
                               /* the device ends here                                      */  \
  X(MemInfo, "meminfo")        /* device free/total bytes ("free", "total" fields)          */  \
  X(Mark, "mark")              /* user phase marker ("label" field)                         */  \
  X(Sync, "sync")              /* (kind none, no range) every "delayed" event with          */  \
                               /* t <= this event's t is on an earlier line (readers merge  */  \
                               /* delayed events into the timeline by t up to here)         */  \
  X(ScopeBegin, "scope_begin") /* (kind none, no range) a named scope opens on this thread: */  \
                               /* "label" its name, "api" who opened it (a test, a phase)   */  \
  X(ScopeEnd, "scope_end")     /* ... and closes: ends the innermost open scope with the    */  \
                               /* same "label" or, when it has one, the same "range"        */

enum class Op : uint8_t {
#define GPUMEMTRACE_OP_ENUM(name, str) name,
  GPUMEMTRACE_OPS(GPUMEMTRACE_OP_ENUM)
#undef GPUMEMTRACE_OP_ENUM
  // Not an event op (parse_op does not know it, no site or event line carries it): what an
  // "allocator_settings" record is while it travels through the recorder's ring and the reader's
  // merger, so that it keeps its place in the timeline.
  AllocatorSettings,
  // Not an event op either: a "gc" record on the same way.
  Gc,
  // Nor these: "pause" and "resume" records on their way through the ring.
  Pause,
  Resume,
};

inline constexpr const char* op_name(Op op) {
  switch (op) {
#define GPUMEMTRACE_OP_CASE(name, str) \
  case Op::name:                       \
    return str;
    GPUMEMTRACE_OPS(GPUMEMTRACE_OP_CASE)
#undef GPUMEMTRACE_OP_CASE
    case Op::AllocatorSettings:
      return kTypeAllocatorSettings;
    case Op::Gc:
      return kTypeGc;
    case Op::Pause:
      return kTypePause;
    case Op::Resume:
      return kTypeResume;
  }
  return "unknown";
}

// Which of addr and size an event of `op` carries (both versions): the ops that touch no memory
// range carry neither; trim carries a size (the bytes the pool keeps) and no address.
inline constexpr bool op_has_size(Op op) {
  return op != Op::Mark && op != Op::MemInfo && op != Op::Reset && op != Op::Sync && op != Op::ScopeBegin &&
         op != Op::ScopeEnd && op != Op::AllocatorSettings && op != Op::Gc && op != Op::Pause &&
         op != Op::Resume;
}
inline constexpr bool op_has_addr(Op op) { return op_has_size(op) && op != Op::Trim; }

// ---- memory kinds ("kind" field of an event) ----
#define GPUMEMTRACE_KINDS(X)                                                              \
  X(Device, "device")     /* ordinary device memory (cudaMalloc, cuMemAlloc, pitch, 3D)  */ \
  X(Async, "async")       /* stream-ordered pool memory (cudaMallocAsync & friends)      */ \
  X(Managed, "managed")   /* unified memory (cudaMallocManaged)                          */ \
  X(Host, "host")         /* page-locked host memory (cudaMallocHost / cudaHostAlloc)    */ \
  X(Array, "array")       /* CUDA arrays (cudaMallocArray); size is an estimate          */ \
  X(Physical, "physical") /* cuMemCreate physical allocation (counts toward usage)       */ \
  X(Virtual, "virtual")   /* cuMemAddressReserve range (address space only)              */ \
  X(Block, "block")       /* sub-allocation reported through gpumemtrace.h               */ \
  X(None, "none")         /* events that carry no memory (mark, meminfo, reset)          */

enum class Kind : uint8_t {
#define GPUMEMTRACE_KIND_ENUM(name, str) name,
  GPUMEMTRACE_KINDS(GPUMEMTRACE_KIND_ENUM)
#undef GPUMEMTRACE_KIND_ENUM
};

inline constexpr const char* kind_name(Kind kind) {
  switch (kind) {
#define GPUMEMTRACE_KIND_CASE(name, str) \
  case Kind::name:                       \
    return str;
    GPUMEMTRACE_KINDS(GPUMEMTRACE_KIND_CASE)
#undef GPUMEMTRACE_KIND_CASE
  }
  return "unknown";
}

// The inverse of op_name / kind_name: false for a name this version does not know.
inline constexpr bool parse_op(std::string_view name, Op* op) {
#define GPUMEMTRACE_OP_PARSE(id, str) \
  if (name == str) return *op = Op::id, true;
  GPUMEMTRACE_OPS(GPUMEMTRACE_OP_PARSE)
#undef GPUMEMTRACE_OP_PARSE
  return false;
}

inline constexpr bool parse_kind(std::string_view name, Kind* kind) {
#define GPUMEMTRACE_KIND_PARSE(id, str) \
  if (name == str) return *kind = Kind::id, true;
  GPUMEMTRACE_KINDS(GPUMEMTRACE_KIND_PARSE)
#undef GPUMEMTRACE_KIND_PARSE
  return false;
}

// ---- field names ----
// Header
inline constexpr const char* kFieldFormat = "format";       // always kFormatName
inline constexpr const char* kFieldVersion = "version";     // always kVersion
inline constexpr const char* kFieldPid = "pid";
inline constexpr const char* kFieldPpid = "ppid";
inline constexpr const char* kFieldExe = "exe";             // /proc/self/exe
inline constexpr const char* kFieldCmdline = "cmdline";     // list of strings
inline constexpr const char* kFieldHost = "host";
inline constexpr const char* kFieldStartTime = "start_time_ns";   // CLOCK_REALTIME at start, ns
inline constexpr const char* kFieldClock = "clock";               // "monotonic": what "t" counts
inline constexpr const char* kFieldClockStart = "clock_start_ns"; // CLOCK_MONOTONIC at start
inline constexpr const char* kFieldBackend = "backend";           // "interpose" | "cupti"
inline constexpr const char* kBackendPytorchSnapshot = "pytorch_snapshot";  // the snapshot import's
inline constexpr const char* kFieldStackDepth = "stack_depth";
inline constexpr const char* kFieldOnFull = "on_full";            // "wait" | "drop"
inline constexpr const char* kFieldLibrary = "library";           // gpumemtrace version string
// The process's place in a distributed job, from its launcher's variables (optional, each only when
// set): rank among all processes, rank on its node, number of processes, and the variable the
// rank came from ("RANK", "SLURM_PROCID", ...).
inline constexpr const char* kFieldRank = "rank";
inline constexpr const char* kFieldLocalRank = "local_rank";
inline constexpr const char* kFieldWorldSize = "world_size";
inline constexpr const char* kFieldRankFrom = "rank_from";

// Module
inline constexpr const char* kFieldId = "id";
inline constexpr const char* kFieldPath = "path";
inline constexpr const char* kFieldBase = "base";           // load bias "0x..."
inline constexpr const char* kFieldSize = "size";
inline constexpr const char* kFieldBuildId = "build_id";    // hex, "" when unknown

// Frame
inline constexpr const char* kFieldIp = "ip";               // "0x..." absolute (native frames)
inline constexpr const char* kFieldModule = "module";       // module id (native frames)
inline constexpr const char* kFieldOffset = "offset";       // "0x..." ip - module base
inline constexpr const char* kFieldFunction = "function";   // demangled, "" when unknown
inline constexpr const char* kFieldFile = "file";
inline constexpr const char* kFieldLine = "line";
inline constexpr const char* kFieldInlined = "inlined";     // list of {function,file,line}, the
                                                            // inlined callees at ip, innermost first
inline constexpr const char* kFieldLang = "lang";           // "native" (default) | "python"
inline constexpr const char* kLangPython = "python";  // value of "lang" for Python frames

// Stack
inline constexpr const char* kFieldFrames = "frames";       // list of frame ids, innermost first

// Device
inline constexpr const char* kFieldDevice = "device";       // CUDA ordinal
inline constexpr const char* kFieldName = "name";
inline constexpr const char* kFieldTotal = "total";
inline constexpr const char* kFieldFree = "free";

// Event
inline constexpr const char* kFieldSeq = "seq";             // global sequence number, from 1
inline constexpr const char* kFieldTime = "t";              // CLOCK_MONOTONIC ns
inline constexpr const char* kFieldTid = "tid";
inline constexpr const char* kFieldApi = "api";             // e.g. "cudaMalloc"
inline constexpr const char* kFieldDriverApi = "driver_api";// the driver call underneath, if seen
inline constexpr const char* kFieldOp = "op";
inline constexpr const char* kFieldKind = "kind";
inline constexpr const char* kFieldAddr = "addr";           // "0x..."
// kFieldSize: bytes
inline constexpr const char* kFieldStream = "stream";       // "0x..."
inline constexpr const char* kFieldPool = "pool";           // "0x..." or allocator pool name
inline constexpr const char* kFieldStack = "stack";         // stack id, 0 = no stack
inline constexpr const char* kFieldResult = "result";       // CUDA error code, 0 = success
inline constexpr const char* kFieldSegment = "segment";     // "0x..." segment of a block event
inline constexpr const char* kFieldHandle = "handle";       // "0x..." physical handle (map/create)
inline constexpr const char* kFieldLabel = "label";         // mark text, scope name
inline constexpr const char* kFieldRange = "range";         // scope events of a cross-thread range
                                                            // (nvtxRangeStart/End): the id that
                                                            // pairs the end with its begin
inline constexpr const char* kFieldDelayed = "delayed";     // true: reported after the fact with its
                                                            // own "t" (PyTorch history); its seq is
                                                            // the report's, order it by t (see sync)
inline constexpr const char* kFieldInitial = "initial";     // true: the state a PyTorch snapshot's
                                                            // history started from (t 0), not an
                                                            // event of the history (snapshot import)
// meminfo events use kFieldFree and kFieldTotal.

// Version 2 event lines: no "type"; the first key is kFieldEventSite. The fields a site holds
// (tid, api, driver_api, op, kind, device, stack, delayed) are not repeated; these short keys
// replace the v1 names of the fields every event has; the optional fields (stream, pool, segment,
// handle, free, total, label, range) keep their names. A field at its default is left out.
inline constexpr const char* kFieldEventSite = "e";   // site id (required, first)
inline constexpr const char* kFieldTimeDelta = "t";   // t - t of the previous event line (signed;
                                                      // the first event line's is its t)
inline constexpr const char* kFieldSeqJump = "q";     // seq, only when != previous event's seq + 1
                                                      // (the first: when != 1)
inline constexpr const char* kFieldShortAddr = "a";   // "0x...", as addr
inline constexpr const char* kFieldShortSize = "s";   // size, left out when 0
inline constexpr const char* kFieldShortResult = "r"; // result, left out when 0

// "api" of the scope and mark events made from NVTX ranges and marks (interpose/hooks/nvtx.cpp): the
// analyzer makes such scopes phases of their thread, not leak checks.
inline constexpr const char* kApiNvtx = "nvtx";

// The "result" of a scope_end: bits (docs/trace-format.md, "Scopes"), 0 for a plain end.
inline constexpr int64_t kScopeFailed = 1;          // the work inside failed (a test that failed): not checked
inline constexpr int64_t kScopeOwnLeakLimit = 2;    // it had a leak limit of its own (pytest's gpu_leak_limit),
                                                    // which takes precedence over --fail-on-leak
inline constexpr int64_t kScopeOverMemoryLimit = 4; // it went over its own memory limit (gpu_memory_limit)
inline constexpr int64_t kScopeOverLeakLimit = 8;   // it went over its own leak limit (gpu_leak_limit)

// allocator_settings (and kFieldSeq, kFieldTime, kFieldTid, kFieldDevice: -1 = every device)
inline constexpr const char* kFieldSource = "source";       // who set them: one of kSettingsSource*
inline constexpr const char* kFieldConf = "conf";           // PYTORCH_CUDA_ALLOC_CONF syntax, only the
                                                            // allocator's own keys (trace/alloc_conf.h)
inline constexpr const char* kFieldFraction = "fraction";   // set_per_process_memory_fraction's, 0..1
// Sources. kSettingsSourceInForce: what the allocator ran with when the PyTorch hook turned the
// history on (PyTorch's own report of it, _snapshot()["allocator_settings"]); applied as PyTorch's
// parser applies a string (max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold
// back to their defaults first). kSettingsSourceSetAllocatorSettings: the program's later
// torch.cuda.memory._set_allocator_settings(conf) (or torch._C._accelerator_setAllocatorSettings),
// applied the same way. kSettingsSourceMemoryFraction: set_per_process_memory_fraction(fraction,
// device).
inline constexpr const char* kSettingsSourceInForce = "in_force";
inline constexpr const char* kSettingsSourceSetAllocatorSettings = "_set_allocator_settings";
inline constexpr const char* kSettingsSourceMemoryFraction = "set_per_process_memory_fraction";
// Header: the allocator's variables as the environment the process started with had them
// (/proc/self/environ; only the allocator's own keys, trace/alloc_conf.h), each only when set.
inline constexpr const char* kFieldEnvAllocConf = "pytorch_alloc_conf";             // PYTORCH_ALLOC_CONF
inline constexpr const char* kFieldEnvCudaAllocConf = "pytorch_cuda_alloc_conf";    // PYTORCH_CUDA_ALLOC_CONF
inline constexpr const char* kFieldEnvHipAllocConf = "pytorch_hip_alloc_conf";      // PYTORCH_HIP_ALLOC_CONF

// Dropped / footer
inline constexpr const char* kFieldCount = "count";         // dropped: events lost since last record
inline constexpr const char* kFieldDroppedTotal = "dropped_total";
inline constexpr const char* kFieldEvents = "events";       // footer: events written
inline constexpr const char* kFieldEndTime = "end_time";    // footer, gc: CLOCK_MONOTONIC ns
inline constexpr const char* kFieldNotWritten = "not_written";  // footer of a capped trace: events
                                                                // consumed after the cap, not written
// How the process ended (footer): "end" one of kEndNames below; "exit_status" the status its
// parent sees (0-255) for exit and _exit, when known; "signal" the signal's number for signal.
inline constexpr const char* kFieldEnd = "end";
inline constexpr const char* kFieldExitStatus = "exit_status";
inline constexpr const char* kFieldSignal = "signal";

// Unknown: a footer without "end" (written before the field existed) or an end this version does not
// know: a clean end, nothing more is known.
enum class End : uint8_t {
  Unknown,
  Exit,       // "exit": exit() from any thread, or a return from main
  QuickExit,  // "_exit": _exit() or _Exit(), no exit handlers ran
  Signal,     // "signal": SIGTERM, SIGINT or SIGHUP took its default action (terminate)
  Exec,       // "exec": exec replaced the program's image (the new image has its own trace)
  Dump,       // "dump": the process was still running; this copy of its trace was sealed by a dump
              // (gpumemtrace_dump(), Python's gpumemtrace.dump()) and ends there
};
inline constexpr const char* kEndNames[] = {"", "exit", "_exit", "signal", "exec", "dump"};  // by End

inline constexpr const char* end_name(End end) { return kEndNames[static_cast<int>(end)]; }

// The inverse of end_name; Unknown for a name this version does not know (a newer writer's).
inline constexpr End parse_end(std::string_view name) {
  for (int i = 1; i < static_cast<int>(sizeof(kEndNames) / sizeof(kEndNames[0])); ++i)
    if (name == kEndNames[i]) return static_cast<End>(i);
  return End::Unknown;
}

// Capped: "seq" the first event not written, "t" its time, "size" the trace bytes written so far
// (before compression), and the cap:
inline constexpr const char* kFieldMaxBytes = "max_bytes";

// ---- limits (docs/trace-format.md "Limits"; docs/security.md lists each with its test) ----
// The writer never writes past them; a reader refuses a longer line and cuts a longer string.
// Integers that count bytes or events (size, free, total, count, ...): exact in a double.
inline constexpr uint64_t kMaxInteger = (uint64_t{1} << 53) - 1;
// Any string value, once unescaped (UTF-8 bytes): a longer one is cut at a character boundary and
// ends with kCutMark, the whole at most kMaxStringBytes.
inline constexpr uint64_t kMaxStringBytes = 4096;
inline constexpr const char* kCutMark = "...[cut]";
// Any line, '\n' excluded. The writer's longest (a frame with kMaxInlinedLevels levels of names at
// kMaxStringBytes, every byte escaped) stays below it.
inline constexpr uint64_t kMaxLineBytes = uint64_t{4} << 20;
inline constexpr int kMaxInlinedLevels = 64;   // a frame's "inlined" list
inline constexpr int kMaxStackFrames = 1024;   // a stack's "frames" (the recorder writes at most 96,
                                               // the snapshot import 512)
inline constexpr int kMaxCmdlineArgs = 64;     // the header's "cmdline": further ones become one last
                                               // element "...[N more arguments cut]"

// A value the program passed that the format cannot hold is clamped into its field (size to
// kMaxInteger, and to the end of the address space from addr; device to -1; free, total to
// kMaxInteger) and kept exactly beside it, as a decimal string (docs/trace-format.md):
inline constexpr const char* kFieldSizeExact = "size_exact";      // or kOutOfRange: above 2^64 - 1
inline constexpr const char* kFieldDeviceExact = "device_exact";  // a device below -1
inline constexpr const char* kFieldFreeExact = "free_exact";
inline constexpr const char* kFieldTotalExact = "total_exact";
inline constexpr const char* kOutOfRange = "out of range";

}  // namespace gpumemtrace::format
