// tests/unit/recorder_held_state_test.cpp — what the flight recorder's checkpoint holds (held_state.h):
// each kind paired with its own undoing by address, a reset ending a device's, scopes by name or range.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "interpose/writer/held_state.h"

namespace gpumemtrace {
namespace {

using format::Op;

EventRecord event(uint64_t seq, Op op, uint64_t addr = 0, uint64_t size = 0, int32_t device = 0) {
  EventRecord r;
  r.seq = seq;
  r.op = op;
  r.addr = addr;
  r.size = size;
  r.device = device;
  return r;
}

EventRecord scope(uint64_t seq, Op op, const char* name, uint64_t range = 0) {
  EventRecord r = event(seq, op);
  r.kind = format::Kind::None;
  r.flags = kHasLabel | (range ? kHasRange : 0);
  strncpy(r.label, name, sizeof r.label - 1);
  r.range = range;
  return r;
}

std::vector<uint64_t> seqs(const HeldState& held) {
  std::vector<uint64_t> out;
  for (const HeldEvent* h : held.in_order()) out.push_back(h->seq);
  return out;
}

TEST(HeldState, EachKindEndsWithItsOwnUndoingByAddress) {
  HeldState held;
  held.apply(event(1, Op::Alloc, 0x1000, 64), 7);
  held.apply(event(2, Op::BlockAlloc, 0x1000, 16), 8);  // a block at its segment's address
  held.apply(event(3, Op::Reserve, 0x9000, 4096), 0);
  held.apply(event(4, Op::Map, 0x9000, 4096), 0);
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{1, 2, 3, 4}));
  held.apply(event(5, Op::BlockFree, 0x1000, 16), 0);  // the block, not its segment
  held.apply(event(6, Op::Unmap, 0x9000, 4096), 0);
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(held.in_order()[0]->stack, 7u);
  EXPECT_EQ(held.in_order()[0]->size, 64u);
  held.apply(event(7, Op::Free, 0x1000), 0);
  held.apply(event(8, Op::Unreserve, 0x9000), 0);
  EXPECT_EQ(held.size(), 0u);
}

TEST(HeldState, AFailedAllocationHoldsNothing) {
  HeldState held;
  EventRecord failed = event(1, Op::Alloc, 0, 1 << 30);
  failed.flags = kHasResult;
  failed.result = 2;
  held.apply(failed, 0);
  EXPECT_EQ(held.size(), 0u);
}

TEST(HeldState, AResetEndsItsDeviceOnly) {
  HeldState held;
  held.apply(event(1, Op::Alloc, 0x1000, 64, 0), 0);
  held.apply(event(2, Op::Alloc, 0x2000, 64, 1), 0);
  held.apply(event(3, Op::BlockAlloc, 0x1000, 16, 0), 0);
  held.apply(event(4, Op::Reset, 0, 0, 0), 0);
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{2}));
}

TEST(HeldState, ScopesCloseTheInnermostOfTheirNameOrRange) {
  HeldState held;
  held.apply(scope(1, Op::ScopeBegin, "serve"), 0);
  held.apply(scope(2, Op::ScopeBegin, "request"), 0);
  held.apply(scope(3, Op::ScopeBegin, "request"), 0);
  held.apply(scope(4, Op::ScopeBegin, "span", 42), 0);
  held.apply(scope(5, Op::ScopeEnd, "request"), 0);
  held.apply(scope(6, Op::ScopeEnd, "other name", 42), 0);  // a range ends by its id
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{1, 2}));
  EventRecord rebuilt;
  held.in_order()[1]->fill(&rebuilt);
  EXPECT_STREQ(rebuilt.label_text(), "request");
  EXPECT_EQ(rebuilt.op, Op::ScopeBegin);
}

TEST(HeldState, OpenScopesAreBounded) {
  HeldState held;
  for (uint64_t i = 1; i <= HeldState::kMaxOpenScopes + 10; ++i) held.apply(scope(i, Op::ScopeBegin, "leaky"), 0);
  EXPECT_EQ(held.size(), HeldState::kMaxOpenScopes);
  EXPECT_EQ(held.in_order().front()->seq, 11u);  // the oldest forgotten
}

TEST(HeldState, TheAllocatorSettingsInForceOnePerDeviceOrOneForAll) {
  HeldState held;
  auto settings = [](uint64_t seq, int32_t device, const char* conf) {
    EventRecord r = event(seq, Op::AllocatorSettings, 0, 0, device);
    r.kind = format::Kind::None;
    r.flags = kHasLabel;
    strncpy(r.label, conf, sizeof r.label - 1);
    return r;
  };
  held.apply(settings(1, -1, "expandable_segments:True"), 0);
  held.apply(event(2, Op::Alloc, 0x1000, 64), 7);
  held.apply(settings(3, 0, "garbage_collection_threshold:0.6"), 0);
  held.apply(settings(4, 1, "max_split_size_mb:128"), 0);
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{1, 2, 3, 4}));  // device 0's and 1's over every device's
  held.apply(settings(5, 0, "roundup_power2_divisions:4"), 0);  // device 0's last replaces its first
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{1, 2, 4, 5}));
  EXPECT_STREQ(held.in_order().back()->label, "roundup_power2_divisions:4");
  EventRecord fraction = settings(6, -1, "");
  fraction.flags = kHasFraction;
  fraction.fraction = 0.5;
  held.apply(fraction, 0);  // every device's replaces them all
  EXPECT_EQ(seqs(held), (std::vector<uint64_t>{2, 6}));
  EventRecord out;
  held.in_order().back()->fill(&out);
  EXPECT_EQ(out.fraction, 0.5);
  EXPECT_EQ(out.flags & kHasFraction, kHasFraction);
}

}  // namespace
}  // namespace gpumemtrace
