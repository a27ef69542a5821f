// interpose/recorder/stack_table.cpp — see stack_table.h.
#include "interpose/recorder/stack_table.h"

#include <sys/mman.h>

#include <cstring>

namespace gpumemtrace {
namespace {

// A probe sequence longer than this means the index is nearly full: the stack goes inline.
constexpr int kMaxProbes = 16;

// 64-bit hash of a stack: four independent lanes (the multiplies overlap), mixed at the end.
uint64_t hash_stack(const uintptr_t* ips, int n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t lane[4] = {static_cast<uint64_t>(n), 0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull};
  for (int i = 0; i < n; ++i) lane[i & 3] = (lane[i & 3] + ips[i]) * kMul;
  uint64_t h = lane[0] ^ (lane[1] >> 17) ^ (lane[2] << 13) ^ (lane[3] >> 29);
  h ^= h >> 32;
  h *= kMul;
  return h ^ (h >> 29);
}

}  // namespace

StackTable::~StackTable() {
  if (arena_) munmap(arena_, arena_words_ * sizeof(uint64_t));
  if (index_) munmap(index_, (index_mask_ + 1) * sizeof(uint64_t));
}

bool StackTable::init(size_t arena_words, size_t index_slots) {
  if (index_slots < 2 || (index_slots & (index_slots - 1)) != 0 || arena_words >= (size_t{1} << 32)) return false;
  // mmap, not malloc: init() runs on the first event's path. Fresh pages read as zero: empty slots.
  void* arena = mmap(nullptr, arena_words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (arena == MAP_FAILED) return false;
  void* index = mmap(nullptr, index_slots * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (index == MAP_FAILED) {
    munmap(arena, arena_words * sizeof(uint64_t));
    return false;
  }
  arena_ = static_cast<uint64_t*>(arena);
  arena_words_ = arena_words;
  index_ = static_cast<std::atomic<uint64_t>*>(index);
  index_mask_ = index_slots - 1;
  return true;
}

bool StackTable::holds(uint32_t id, const uintptr_t* ips, int n) const {
  return arena_[id - 1] == static_cast<uint64_t>(n) && memcmp(&arena_[id], ips, n * sizeof(uintptr_t)) == 0;
}

uint32_t StackTable::intern(const uintptr_t* ips, int n) {
  if (!arena_ || n <= 0) return 0;
  const uint64_t h = hash_stack(ips, n);
  const uint64_t tag = (h >> 32) | 1;  // never 0: a word of 0 is an empty slot
  for (int probe = 0; probe < kMaxProbes; ++probe) {
    std::atomic<uint64_t>& slot = index_[(h + probe) & index_mask_];
    uint64_t word = slot.load(std::memory_order_acquire);
    if (word == 0) {
      const uint64_t at = arena_used_.fetch_add(n + 1, std::memory_order_relaxed);
      if (at + n + 1 > arena_words_) return 0;  // full (the claimed words stay unused)
      arena_[at] = static_cast<uint64_t>(n);
      memcpy(&arena_[at + 1], ips, n * sizeof(uintptr_t));
      const uint32_t id = static_cast<uint32_t>(at + 1);
      if (slot.compare_exchange_strong(word, (tag << 32) | id, std::memory_order_release, std::memory_order_acquire))
        return id;
      // Another thread took the slot meanwhile (our entry stays unused): it may hold this very stack.
    }
    if ((word >> 32) == tag && holds(static_cast<uint32_t>(word), ips, n)) return static_cast<uint32_t>(word);
  }
  return 0;
}

}  // namespace gpumemtrace
