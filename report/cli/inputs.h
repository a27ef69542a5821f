// report/cli/inputs.h — what gpumem-report's TRACE arguments name: files and directories (read where
// they are), and streams (`-` for standard input, a FIFO, /dev/stdin on a pipe, a character device),
// which are read once, to the end, into a file with no name (gone with the process, however it ends),
// because the reader opens a trace more than once (the snapshot check reads its first bytes, the
// what-if replays read it again) and a stream cannot be opened again. The copy is bounded by the
// reader's limits: a stream is read through the reader as it is copied (trace_reader.h), so one that
// is not a trace (/dev/zero, a newline bomb) is refused within megabytes; a PyTorch snapshot is
// copied up to the snapshot reader's size limit (pickle_reader.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "report/analyses/analyze.h"

namespace gpumemtrace::report {

// One trace to analyze: `path` is where its bytes are, `name` what the report calls it.
struct TraceInput {
  std::string path;
  std::string name;
  std::string spooled;  // the copy of a stream, /proc/self/fd/N ("" for a file); closed by ~InputSet
};

// A file by identity (st_dev, st_ino), and what the command line called it.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;
};

class InputSet {
 public:
  InputSet() = default;
  ~InputSet();  // closes the copies (which have no name: nothing is left behind)
  InputSet(const InputSet&) = delete;
  InputSet& operator=(const InputSet&) = delete;

  // The traces `arg` names (a directory: its traces, sorted). Streams are read here. Throws
  // std::runtime_error for a missing path, an empty directory, a stream that cannot be read, or
  // standard input named twice; TraceError for a stream the reader refuses.
  std::vector<TraceInput> resolve(const std::string& arg);

  // The files the streams read so far came from: standard input's (`gpumem-report - < TRACE`), a FIFO.
  const std::vector<FileId>& stream_sources() const { return stream_sources_; }

 private:
  std::vector<int> copies_;
  std::vector<FileId> stream_sources_;
  bool stdin_read_ = false;
};

// True for `-` and for a path that is a FIFO, a character device or a socket.
bool is_stream_input(const std::string& arg);

// Throws std::invalid_argument when `output` is one of `inputs` (the same path, or the same file by
// st_dev/st_ino) or one of `sources` (standard input's file, by identity): opening it for writing
// would empty a trace or the suppressions file before it is read.
void refuse_output_among_inputs(const std::string& output, const std::vector<std::string>& inputs,
                                const std::vector<FileId>& sources = {});

// analyze_file on `input`, with errors and the report naming `input.name`.
ProcessReport analyze_input(const TraceInput& input, const Suppressions& suppressions, ReadObserver* observer,
                            const AnalysisRequest& what_if = AnalysisRequest{});

}  // namespace gpumemtrace::report
