// report/analyses/device_table.h — per-device state, created on first use and never removed,
// looked up in O(1) for the device numbers a process has (an index by device) and iterated in
// device order (the map that owns the entries).
//
// The index holds pointers into the map (whose nodes never move); entries are never erased, so it
// never dangles. Not copyable for that reason. Single-threaded.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory_resource>
#include <type_traits>

namespace gpumemtrace::report {

template <typename State>
class DeviceTable {
 public:
  DeviceTable() = default;
  // A State made from a memory resource (its node-based containers' nodes: node_pool.h) gets `nodes`.
  explicit DeviceTable(std::pmr::memory_resource* nodes) : nodes_(nodes) {}
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  // The state of `device`, value-initialized on first use.
  State& get(int32_t device) {
    const uint32_t slot = static_cast<uint32_t>(device) + 1;  // -1 ("no device") is slot 0
    if (slot < kIndexed && index_[slot]) return *index_[slot];
    return create(device);
  }
  const State* find(int32_t device) const {
    const uint32_t slot = static_cast<uint32_t>(device) + 1;
    if (slot < kIndexed) return index_[slot];
    auto it = map_.find(device);
    return it == map_.end() ? nullptr : &it->second;
  }

  // Every device's state, by device number. Values may be changed; entries are never erased.
  const std::map<int32_t, State>& all() const { return map_; }
  typename std::map<int32_t, State>::iterator begin() { return map_.begin(); }
  typename std::map<int32_t, State>::iterator end() { return map_.end(); }

 private:
  // Out of line: the first use of a device, or a device number beyond the index.
  __attribute__((noinline)) State& create(int32_t device) {
    State& state = emplace(device);
    const uint32_t slot = static_cast<uint32_t>(device) + 1;
    if (slot < kIndexed) index_[slot] = &state;
    return state;
  }

  State& emplace(int32_t device) {
    if constexpr (std::is_constructible_v<State, std::pmr::memory_resource*>) {
      if (nodes_) return map_.try_emplace(device, nodes_).first->second;
    }
    return map_.try_emplace(device).first->second;
  }

  std::pmr::memory_resource* nodes_ = nullptr;
  // Devices -1 .. kIndexed-2 (a node has at most a few dozen) go through the index; others, never
  // seen in practice but valid in a trace, through the map.
  static constexpr uint32_t kIndexed = 65;
  std::map<int32_t, State> map_;
  std::array<State*, kIndexed> index_{};
};

}  // namespace gpumemtrace::report
