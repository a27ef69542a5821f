// interpose/recorder/stack_table.h — native stacks interned by the recording threads: an event carries
// a stack id through the ring instead of its frames, and the writer thread reads the frames of an id
// from here the first time it sees it (then knows the id).
//
// An append-only arena of entries [n, ip_0 .. ip_n-1] (an id is an entry's word offset + 1) and an
// open-addressing index of (hash tag, id) words. Lock-free: a new entry is written to arena space
// claimed with one fetch_add, then published with one CAS of an empty index word (release); a reader
// that finds the word (acquire) sees the whole entry. Two threads interning the same new stack at once
// may both add it (two ids, one stack: the writer gives both the same trace stack). Entries are never
// removed; when the arena or a probe sequence is full, intern() returns 0 and the event carries its
// frames as before. Fixed memory, mapped once (MAP_NORESERVE: pages become resident as entries fill
// them). No malloc, no lock, no system call after init().
// Thread-safety: intern() from any thread, frames() from any thread for an id that reached it through
// the ring (or another release/acquire edge from the thread that interned it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpumemtrace {

class StackTable {
 public:
  StackTable() = default;
  StackTable(const StackTable&) = delete;
  StackTable& operator=(const StackTable&) = delete;
  ~StackTable();

  // Maps an arena of `arena_words` words and an index of `index_slots` (a power of two). False when the
  // memory cannot be mapped. Not thread-safe: call before any intern().
  [[nodiscard]] bool init(size_t arena_words = size_t{1} << 22, size_t index_slots = size_t{1} << 18);

  // The id (>= 1) of the stack ips[0..n) (1 <= n), adding it when new; 0 when it cannot be added.
  uint32_t intern(const uintptr_t* ips, int n);

  // True when `id` (from intern() on this table) is the stack ips[0..n): a thread that records the same
  // stack again (a loop) checks its last id so, without hashing.
  bool holds(uint32_t id, const uintptr_t* ips, int n) const;

  // The frames of `id` (from intern()): their count in *n, the innermost first.
  const uintptr_t* frames(uint32_t id, int* n) const {
    *n = static_cast<int>(arena_[id - 1]);
    return reinterpret_cast<const uintptr_t*>(&arena_[id]);
  }

 private:

  uint64_t* arena_ = nullptr;  // written once per entry before it is published, then read-only
  size_t arena_words_ = 0;
  std::atomic<uint64_t> arena_used_{0};
  std::atomic<uint64_t>* index_ = nullptr;  // 0: empty; else (hash tag << 32) | id
  size_t index_mask_ = 0;
};

}  // namespace gpumemtrace
