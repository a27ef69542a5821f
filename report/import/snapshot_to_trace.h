// report/import/snapshot_to_trace.h — converts a PyTorch memory snapshot (the pickle written by
// `torch.cuda.memory._dump_snapshot`) into a gpumemtrace version-1 timeline (docs/trace-format.md,
// section "PyTorch snapshot import", documents the mapping).
//
// The pickle is read with the restricted reader (pickle_reader.h): plain data only, so a malicious
// file is rejected, never executed. The output is an ordinary trace, so every analysis of
// gpumem-report (leaks, peaks, OOM post-mortems, growth, fragmentation, gates) applies unchanged.
//
// Thread-safety: the functions are reentrant (no global state).
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/import/pickle_reader.h"

namespace gpumemtrace::snapshot {

// Limits on what one snapshot may expand to (docs/trace-format.md, "PyTorch snapshot import"). The
// pickle's memo lets a list be referenced from many places, so a few KB can stand for 10^9 history
// entries ("billion laughs"); the converter counts the list items it visits and the bytes it writes,
// and refuses the snapshot past either limit. Both grow with the input, so a genuine snapshot (which
// shares only strings and frame dicts) never reaches them.
inline constexpr uint64_t kExpansionItemsBase = 1u << 20;           // + 1 item per input byte
inline constexpr uint64_t kExpansionOutputBase = 256ull << 20;      // + kExpansionOutputPerInputByte
inline constexpr uint64_t kExpansionOutputPerInputByte = 64;

struct ConvertStats {
  uint64_t segments = 0;          // segments in the snapshot (state at the end)
  uint64_t trace_entries = 0;     // history entries over all devices
  uint64_t initial_segments = 0;  // segments synthesized as live before the first history entry
  uint64_t initial_blocks = 0;    // blocks synthesized as live before the first history entry
  uint64_t events = 0;            // event lines written
  uint64_t ignored_entries = 0;   // free_requested (when free_completed exists), snapshot, unknown
  // Blocks outside every segment (left out of the trace) + history entries that contradict the final
  // state; when not 0, warnings[0] is the one line that names them.
  uint64_t inconsistencies = 0;
  std::vector<std::string> warnings;  // at most a few, one line each
};

// A snapshot that cannot be converted, named like report's TraceError names a trace: what() is
// "FILE: MESSAGE", message() the line without the file (callers prefix it their own way: "PyTorch
// snapshot: ...", "gpumem-snapshot2trace: FILE: ..."). offset(): the pickle's byte offset at fault when
// the pickle itself is malformed, else pickle::ParseError::kNoOffset.
class SnapshotError : public std::runtime_error {
 public:
  SnapshotError(const std::string& file, const std::string& message,
                uint64_t offset = pickle::ParseError::kNoOffset)
      : std::runtime_error(file + ": " + message), file_(file), message_(message), offset_(offset) {}
  const std::string& file() const { return file_; }
  const std::string& message() const { return message_; }
  uint64_t offset() const { return offset_; }

 private:
  std::string file_;
  std::string message_;
  uint64_t offset_;
};

// Reads the snapshot at in_path and writes the trace to out, line by line as it is converted (memory:
// the parsed pickle and the history entries, O(input size); never the converted trace). The header's
// "source" is in_path. Throws SnapshotError naming in_path; `out` may then hold part of a trace.
void snapshot_to_trace(const std::string& in_path, std::ostream& out, ConvertStats* stats = nullptr);

// Same from bytes already in memory (used by the fuzz target and the unit tests); errors and the
// header name `source_name`.
void snapshot_bytes_to_trace(std::string bytes, const std::string& source_name, std::ostream& out,
                             ConvertStats* stats = nullptr);

// True when the file starts like a binary pickle (PROTO opcode, protocol 2..5). Cheap: reads 2 bytes.
bool looks_like_pickle(const std::string& path);

}  // namespace gpumemtrace::snapshot
