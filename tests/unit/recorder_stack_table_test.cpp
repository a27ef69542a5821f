// tests/unit/recorder_stack_table_test.cpp — the recording threads' stack table: one id per stack,
// the frames of an id as interned, 0 (inline frames) when full, concurrent interning.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "interpose/recorder/stack_table.h"

namespace gpumemtrace {
namespace {

using Stack = std::vector<uintptr_t>;

Stack frames_of(const StackTable& table, uint32_t id) {
  int n = 0;
  const uintptr_t* f = table.frames(id, &n);
  return Stack(f, f + n);
}

Stack make_stack(int seed, int depth) {
  Stack s;
  for (int i = 0; i < depth; ++i) s.push_back(0x400000 + 0x1000 * seed + 16 * i);
  return s;
}

TEST(StackTable, OneIdPerStackAndItsFrames) {
  StackTable table;
  ASSERT_TRUE(table.init(1 << 12, 1 << 8));
  const Stack a = make_stack(1, 20), b = make_stack(2, 20), a_shorter(a.begin(), a.begin() + 19);
  const uint32_t ia = table.intern(a.data(), 20);
  const uint32_t ib = table.intern(b.data(), 20);
  const uint32_t ic = table.intern(a_shorter.data(), 19);
  ASSERT_NE(ia, 0u);
  ASSERT_NE(ib, 0u);
  ASSERT_NE(ic, 0u);
  EXPECT_NE(ia, ib);
  EXPECT_NE(ia, ic);  // a prefix is another stack
  EXPECT_EQ(table.intern(a.data(), 20), ia);
  EXPECT_EQ(table.intern(b.data(), 20), ib);
  EXPECT_EQ(frames_of(table, ia), a);
  EXPECT_EQ(frames_of(table, ib), b);
  EXPECT_EQ(frames_of(table, ic), a_shorter);
  EXPECT_TRUE(table.holds(ia, a.data(), 20));
  EXPECT_FALSE(table.holds(ia, b.data(), 20));
  EXPECT_FALSE(table.holds(ia, a.data(), 19));
}

TEST(StackTable, FullTableAnswersZero) {
  StackTable arena_bound;
  ASSERT_TRUE(arena_bound.init(3 * 21, 1 << 8));  // room for three 20-frame stacks
  for (int i = 0; i < 3; ++i) EXPECT_NE(arena_bound.intern(make_stack(i, 20).data(), 20), 0u) << i;
  EXPECT_EQ(arena_bound.intern(make_stack(3, 20).data(), 20), 0u);
  EXPECT_NE(arena_bound.intern(make_stack(1, 20).data(), 20), 0u);  // the known ones still resolve

  StackTable index_bound;
  ASSERT_TRUE(index_bound.init(1 << 16, 4));  // four index slots
  int added = 0;
  for (int i = 0; i < 8; ++i) added += index_bound.intern(make_stack(i, 5).data(), 5) != 0;
  EXPECT_EQ(added, 4);
}

TEST(StackTable, RejectsABadIndexSizeAndAnswersZeroUninitialized) {
  StackTable table;
  EXPECT_FALSE(table.init(1 << 12, 1000));
  const Stack a = make_stack(1, 3);
  EXPECT_EQ(table.intern(a.data(), 3), 0u);
}

// Threads interning overlapping sets of stacks at once: every id they get holds their stack, and a
// stack added by one thread is found by the others.
TEST(StackTable, ConcurrentInterning) {
  StackTable table;
  ASSERT_TRUE(table.init(1 << 20, 1 << 14));
  constexpr int kThreads = 8, kStacks = 500;
  std::atomic<int> wrong{0};
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kStacks));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (int i = 0; i < kStacks; ++i) {
          const int seed = (i * 7 + t) % kStacks;
          const Stack s = make_stack(seed, 1 + seed % 30);
          const uint32_t id = table.intern(s.data(), static_cast<int>(s.size()));
          if (id == 0 || frames_of(table, id) != s) wrong.fetch_add(1);
          ids[t][seed] = id;
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  // After the races, one id per stack for a thread that asks again.
  for (int i = 0; i < kStacks; ++i) {
    const Stack s = make_stack(i, 1 + i % 30);
    EXPECT_EQ(table.intern(s.data(), static_cast<int>(s.size())), table.intern(s.data(), static_cast<int>(s.size())));
  }
}

}  // namespace
}  // namespace gpumemtrace
