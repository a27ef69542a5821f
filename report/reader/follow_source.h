// report/reader/follow_source.h — a trace read while it is being written (gpumemtrace top): at its
// end the source waits for more, as `tail -f` does, until told to stop.
//
// The file is read from its start with pread at its own offset. Waiting, it polls every kFollowPollMs
// and, every kFollowReopenMs without news, opens its path again (when the path still names the same
// file): an NFS client revalidates its cache of a file when it is opened (close-to-open consistency),
// so a trace another host writes on a shared file system is seen to grow. caught_up() says when a
// read gave everything there was (byte_source.h): the line reader then hands its lines on at once.
// Thread-safety: one reading thread; the control's methods are called on it. cancel() (byte_source.h)
// may come from any thread: the line reader's, when a parse error or a stop abandons the read.
#pragma once

#include <memory>
#include <string>

#include "report/reader/byte_source.h"

namespace gpumemtrace::report {

inline constexpr int kFollowPollMs = 50;
inline constexpr int kFollowReopenMs = 1000;

class FollowControl {
 public:
  virtual ~FollowControl() = default;
  // Asked before every read: true ends the input now (read() returns 0), even in the middle of it.
  virtual bool stop_now() = 0;
  // Asked each time the source has caught up and found nothing new: false ends the input (the
  // writer is gone, say); true waits kFollowPollMs and looks again.
  virtual bool keep_waiting() = 0;
};

// `path`, followed from its start; decompressed when its name ends in .zst or it starts with zstd's
// magic number (its first 4 bytes are waited for). `control` must outlive the source. Throws
// std::runtime_error when the file cannot be opened or read.
std::unique_ptr<ByteSource> follow_byte_source(const std::string& path, FollowControl& control);

}  // namespace gpumemtrace::report
