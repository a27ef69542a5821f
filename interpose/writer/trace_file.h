// interpose/writer/trace_file.h — the trace's file: created safely, kept out of the program's way,
// and never written once its descriptor no longer refers to it. docs/security.md has the threat model.
//
// Creation (open_trace_file): a new regular file made with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600; a
// name that is taken (an older trace, a planted FIFO, a symlink) is never opened: a numbered name is
// tried instead. Only a path the user named literally may be an existing FIFO or device (/dev/stdout);
// it is opened O_NONBLOCK, waiting a bounded time for a FIFO's reader.
// Descriptor: moved to a high number (move_fd_high, private_fds.h), close-on-exec; its st_dev/st_ino
// are checked before every write, so a program that closed it (closefrom) or reused the number (dup2,
// open) never gets trace bytes in its own file.
// Where: the writer thread opens the trace in a descriptor table of its own (private_fds.h), so the
// program never sees the descriptor at all; the checks above are for the case where the kernel
// refuses a private table and the writer shares the program's.
// Thread-safety: open_trace_file runs once on the recorder's start-up; a TraceFile is used by the
// writer thread only (close_if_ours also from a fork child, where no other thread exists).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include <string>

namespace gpumemtrace {

// The program's standard output and error (device and inode), as the program's descriptor table has
// them: a path the user named that is the file one of them is redirected to is appended to
// (GPUMEMTRACE_OUTPUT=/dev/stdout > out.txt). Taken on a program thread: the writer's own table has
// /dev/null there.
struct ProgramStreams {
  struct Id {
    bool open = false;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  Id out, err;
  static ProgramStreams of_calling_thread();
};

class TraceFile {
 public:
  TraceFile() = default;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

  // Writes all of `data` (retrying EINTR and short writes; a non-blocking FIFO or terminal is waited
  // for at most kStallMs without progress). First checks that the descriptor is still our file; if
  // the program closed or reused it, reopens our path (O_APPEND) when it is still the same file, with
  // one warning line, and otherwise fails. False with the reason in `error`.
  [[nodiscard]] bool write_all(const char* data, size_t size, std::string* error);

  // Syncs what was written to the disk (fdatasync) when the descriptor is still ours and a regular
  // file; nothing for a FIFO or terminal.
  void sync();

  // Closes the descriptor when it is still ours (a number the program reused is left alone).
  void close_if_ours();

  // Bytes written through this descriptor since the file was created (its size, for a file we
  // created: it is never opened O_APPEND).
  uint64_t written() const { return written_; }

  // True for a regular file we created that is still ours: it can be cut back (cut_back_to).
  bool can_cut_back() const;

  // A new read-only descriptor of this file, from its start (for a dump: writer.h), when it is a
  // regular file we created that is still ours; -1 otherwise (a FIFO, a stream, a number the program
  // took over). Opened through the calling thread's own descriptor table (/proc/self/task/TID/fd),
  // so that a file renamed or removed since is still found. The caller closes it.
  int open_for_reading() const;

  // Cuts a file we created back to its first `size` bytes (a point where everything before is whole:
  // the end of a line, of a zstd block or frame) and writes on from there. Where `size` is 0, the file
  // is removed instead, when its name still is this file (no empty trace is left behind), and
  // `*removed` is set. False when the file cannot be cut back (not ours, not a regular file).
  bool cut_back_to(uint64_t size, bool* removed);

  // Renames the file to `to` (replacing what is there) when its name still is this file, the
  // descriptor going on as it was: for the flight recorder's segments (flight.cpp). False otherwise.
  bool rename_to(const std::string& to);

  static constexpr int kStallMs = 10000;

 private:
  friend bool open_trace_file(const std::string&, bool, TraceFile*, std::string*, std::string*,
                              const ProgramStreams*);
  bool still_ours() const;
  bool reopen();

  std::string path_;
  int fd_ = -1;
  uint64_t written_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool named_ = false;     // the user named this path: symlinks on it may be followed on reopen
  bool nonblock_ = false;  // a FIFO or device opened O_NONBLOCK
  bool created_ = false;   // made by open_trace_file (O_EXCL), not a path the user named that existed
};

// Opens the trace for `path` (already expanded). `named`: the user named this exact path (see
// Config::output_named). `streams`: the program's stdout and stderr (null: the calling thread's). On
// success fills `file`; `note` says why another name was taken (empty when the name was free or
// merely held by an earlier trace of ours). False with `error` on failure.
bool open_trace_file(const std::string& path, bool named, TraceFile* file, std::string* note,
                     std::string* error, const ProgramStreams* streams = nullptr);

// "dir/name.jsonl.zst", 2 -> "dir/name-2.jsonl.zst", "dir/x.42.zst" -> "dir/x.42-2.zst": the number goes
// before the trace suffix (".jsonl...", else a final ".zst"), so the file is still compressed and
// readers still recognise it by its extension.
std::string numbered_path(const std::string& path, int n);
// The same with any `tag` in the number's place: "dir/name.jsonl.zst", "-dump" -> "dir/name-dump.jsonl.zst".
std::string tagged_path(const std::string& path, const std::string& tag);

}  // namespace gpumemtrace
