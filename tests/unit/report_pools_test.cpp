// tests/unit/report_pools_test.cpp — the analyses' per-event containers: NodePool reuses the nodes
// given back (no allocation per event in the steady state) and passes large requests on; DeviceTable
// finds every device number, indexed or not, and iterates in device order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory_resource>
#include <unordered_map>
#include <vector>

#include "report/analyses/device_table.h"
#include "report/analyses/node_pool.h"

using namespace gpumemtrace::report;

TEST(NodePool, ReusesTheNodesGivenBack) {
  NodePool pool;
  std::pmr::map<uint64_t, uint64_t> live(&pool);
  std::vector<const void*> first;
  for (uint64_t i = 0; i < 100; ++i) first.push_back(&*live.emplace(i, i).first);
  live.clear();
  // The same number of nodes again: all of them come from the free list, none from a new slab.
  std::vector<const void*> again;
  for (uint64_t i = 0; i < 100; ++i) again.push_back(&*live.emplace(1000 + i, i).first);
  std::sort(first.begin(), first.end());
  std::sort(again.begin(), again.end());
  EXPECT_EQ(first, again);
}

TEST(NodePool, ServesHashTablesAndLargeRequests) {
  NodePool pool;
  std::pmr::unordered_map<uint64_t, uint64_t> live(&pool);  // its bucket arrays exceed a node
  for (uint64_t round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 5000; ++i) live[i * 7919] = i + round;
    for (uint64_t i = 0; i < 5000; i += 2) live.erase(i * 7919);
  }
  EXPECT_EQ(live.size(), 2500u);
  EXPECT_EQ(live.at(7919), 3u);  // i = 1, last round
  void* big = pool.allocate(1 << 20, 64);
  pool.deallocate(big, 1 << 20, 64);
}

TEST(DeviceTable, FindsEveryDeviceAndIteratesInOrder) {
  DeviceTable<int> table;
  for (int32_t device : {3, -1, 0, 1000, 63, 64, 2000000}) table.get(device) = device * 2;
  EXPECT_EQ(table.get(1000), 2000);
  EXPECT_EQ(*table.find(-1), -2);
  EXPECT_EQ(*table.find(63), 126);
  EXPECT_EQ(*table.find(64), 128);
  EXPECT_EQ(table.find(5), nullptr);
  EXPECT_EQ(table.find(999), nullptr);
  std::vector<int32_t> order;
  for (const auto& [device, value] : table.all()) order.push_back(device);
  EXPECT_EQ(order, (std::vector<int32_t>{-1, 0, 3, 63, 64, 1000, 2000000}));
  int& three = table.get(3);
  for (int32_t device = 4; device < 60; ++device) table.get(device);  // entries never move
  EXPECT_EQ(&three, &table.get(3));
}
