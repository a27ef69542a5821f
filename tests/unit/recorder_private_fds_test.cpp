// tests/unit/recorder_private_fds_test.cpp — the recorder's descriptor numbers
// (interpose/writer/private_fds.h): the writer's private range and the program table's never meet,
// whatever the descriptor limit, and a thread with a table of its own opens and keeps its files there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <thread>

#include "interpose/writer/private_fds.h"

namespace gpumemtrace {
namespace {

TEST(OwnDescriptorRanges, DisjointAndAboveTheStandardStreamsForEveryLimit) {
  for (rlim_t limit : {rlim_t{0}, rlim_t{3}, rlim_t{8}, rlim_t{19}, rlim_t{20}, rlim_t{64}, rlim_t{256}, rlim_t{1015},
                       rlim_t{1016}, rlim_t{1024}, rlim_t{4096}, rlim_t{1} << 20, RLIM_INFINITY}) {
    SCOPED_TRACE(limit);
    const OwnDescriptorRanges r = own_descriptor_ranges(limit);
    EXPECT_GE(r.writer_table, 3);  // 0, 1, 2 are never one of the writer's files
    EXPECT_GE(r.program_table, r.writer_table);
    if (limit >= 20) {  // room for both: the writer's below the program table's, which fits the limit
      EXPECT_LT(r.writer_table, r.program_table);
      EXPECT_LE(static_cast<rlim_t>(r.program_table) + 16, limit);
    }
  }
  EXPECT_EQ(own_descriptor_ranges(RLIM_INFINITY).program_table, 1000);
  EXPECT_EQ(own_descriptor_ranges(RLIM_INFINITY).writer_table, 500);
  EXPECT_EQ(own_descriptor_ranges(1024).program_table, 1000);
  EXPECT_EQ(own_descriptor_ranges(1024).writer_table, 500);
  EXPECT_EQ(own_descriptor_ranges(64).program_table, 48);
  EXPECT_EQ(own_descriptor_ranges(64).writer_table, 24);
}

TEST(PrivateFdTable, FilesOfTheWriterStayInItsRange) {
  rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  const OwnDescriptorRanges r = own_descriptor_ranges(rl.rlim_cur);
  int in_table = -1, moved = -1;
  FdTable table = FdTable::Shared;
  std::thread writer_like([&] {
    table = make_private_fd_table();
    in_table = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    moved = move_fd_high(in_table);
    close(moved);
  });
  writer_like.join();
  if (table == FdTable::Shared) GTEST_SKIP() << "the kernel refused a private descriptor table (seccomp)";
  EXPECT_GE(in_table, r.writer_table);
  EXPECT_LT(in_table, r.program_table);
  EXPECT_EQ(moved, in_table);  // already in the writer's range: left where it is

  // A program thread's descriptor goes to the program table's range.
  const int low = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(low, 0);
  ASSERT_LT(low, r.program_table);
  const int high = move_fd_high(low);
  EXPECT_GE(high, r.program_table);
  EXPECT_EQ(fcntl(low, F_GETFD), -1);  // the original is closed
  close(high);
}

}  // namespace
}  // namespace gpumemtrace
