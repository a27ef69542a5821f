// tests/unit/recorder_format_test.cpp — trace/format.h: every op and kind name parses back to itself,
// and unknown names are refused.
#include <gtest/gtest.h>

#include "trace/format.h"

namespace gpumemtrace::format {
namespace {

TEST(Format, EveryOpAndKindRoundTrips) {
#define CHECK_OP(id, str)                    \
  {                                          \
    Op op{};                                 \
    ASSERT_TRUE(parse_op(op_name(Op::id), &op)); \
    EXPECT_EQ(op, Op::id);                   \
  }
  GPUMEMTRACE_OPS(CHECK_OP)
#undef CHECK_OP
#define CHECK_KIND(id, str)                          \
  {                                                  \
    Kind kind{};                                     \
    ASSERT_TRUE(parse_kind(kind_name(Kind::id), &kind)); \
    EXPECT_EQ(kind, Kind::id);                       \
  }
  GPUMEMTRACE_KINDS(CHECK_KIND)
#undef CHECK_KIND
  Op op{};
  Kind kind{};
  EXPECT_FALSE(parse_op("alloc ", &op));
  EXPECT_FALSE(parse_op("", &op));
  EXPECT_FALSE(parse_kind("Device", &kind));
}

}  // namespace
}  // namespace gpumemtrace::format
