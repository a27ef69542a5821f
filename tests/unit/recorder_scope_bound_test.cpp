// tests/unit/recorder_scope_bound_test.cpp — the writer's bound of a scope's leak
// (interpose/writer/scope_bound.h): the bytes allocated inside the scope that ended last, at both
// layers and from any thread, still live at its end; nested scopes paired by name; -1 for another name.
#include <gtest/gtest.h>

#include <cstring>

#include "interpose/writer/live_set.h"
#include "interpose/writer/scope_bound.h"

namespace gpumemtrace {
namespace {

class ScopeBoundTest : public ::testing::Test {
 protected:
  // Applies one event as the writer does: to the live set, then to the bound.
  void event(format::Op op, uint64_t addr = 0, uint64_t size = 0, const char* name = nullptr,
             const char* api = nullptr) {
    EventRecord r{};
    r.api = api;
    r.seq = ++seq_;
    r.op = op;
    r.addr = addr;
    r.size = size;
    r.device = 0;
    if (name) std::strncpy(r.label, name, kLabelBytes - 1);
    live_.apply(r, 0);
    bound_.on_event(r, live_);
  }
  void begin(const char* name) { event(format::Op::ScopeBegin, 0, 0, name); }
  void end(const char* name) { event(format::Op::ScopeEnd, 0, 0, name); }

  uint64_t seq_ = 0;
  LiveSet live_;
  ScopeBound bound_;
};

TEST_F(ScopeBoundTest, CountsWhatTheScopeAllocatedAndKeptAtBothLayers) {
  event(format::Op::Alloc, 0x1000, 100);  // before the scope: never counted
  EXPECT_FALSE(bound_.tracking());
  begin("test_a");
  EXPECT_TRUE(bound_.tracking());
  event(format::Op::Alloc, 0x2000, 1000);     // kept
  event(format::Op::BlockAlloc, 0x2000, 40);  // a block in it, kept: both layers count
  event(format::Op::Alloc, 0x3000, 7);        // freed inside: not counted
  event(format::Op::Free, 0x3000);
  event(format::Op::Free, 0x1000);            // what came before, freed inside: changes nothing
  end("test_a");
  EXPECT_EQ(bound_.last_ended("test_a"), 1040);
  EXPECT_EQ(bound_.last_ended("test_b"), -1);
  EXPECT_EQ(bound_.last_ended(nullptr), -1);
}

// NVTX ranges are scopes in the trace, but no bound is kept for them: they neither start the live set
// nor replace the last ended scope's bound (each end would walk the whole live set).
TEST_F(ScopeBoundTest, NvtxRangesAreNotBounded) {
  event(format::Op::ScopeBegin, 0, 0, "forward", format::kApiNvtx);
  EXPECT_FALSE(bound_.tracking());
  begin("test_a");
  event(format::Op::Alloc, 0x2000, 1000);
  end("test_a");
  event(format::Op::ScopeBegin, 0, 0, "backward", format::kApiNvtx);
  event(format::Op::ScopeEnd, 0, 0, "backward", format::kApiNvtx);
  EXPECT_EQ(bound_.last_ended("test_a"), 1000);
  EXPECT_EQ(bound_.last_ended("backward"), -1);
}

TEST_F(ScopeBoundTest, NestedScopesPairByNameAndTheLastEndedIsReported) {
  begin("outer");
  event(format::Op::Alloc, 0x1000, 10);
  begin("inner");
  event(format::Op::Alloc, 0x2000, 20);
  end("inner");
  EXPECT_EQ(bound_.last_ended("inner"), 20);
  EXPECT_EQ(bound_.last_ended("outer"), -1);  // not ended yet
  event(format::Op::Free, 0x2000);
  end("outer");
  EXPECT_EQ(bound_.last_ended("outer"), 10);
  EXPECT_EQ(bound_.last_ended("inner"), -1);  // another scope ended since
}

TEST_F(ScopeBoundTest, AnEndWithoutItsBeginKnowsNothing) {
  begin("a");
  end("a");
  EXPECT_EQ(bound_.last_ended("a"), 0);
  end("b");
  EXPECT_EQ(bound_.last_ended("a"), -1);
  EXPECT_EQ(bound_.last_ended("b"), -1);
}

TEST_F(ScopeBoundTest, AResetEndsWhatTheScopeHeld) {
  begin("t");
  event(format::Op::Alloc, 0x2000, 64);
  event(format::Op::Reset);
  end("t");
  EXPECT_EQ(bound_.last_ended("t"), 0);
}

}  // namespace
}  // namespace gpumemtrace
