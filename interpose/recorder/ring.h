// interpose/recorder/ring.h — bounded multi-producer / single-consumer ring of fixed-size records.
//
// The algorithm is Dmitry Vyukov's bounded queue: each slot carries a sequence counter that says whose
// turn it is. A producer claims a ticket with one CAS on `head_` and publishes with a release store; the
// single consumer reads slots in ticket order. The ticket is the event's global sequence number: the
// ring's order IS the timeline's total order, with no second counter to keep consistent.
//
// Invariants:
//  - slot i is writable by the producer holding ticket t (t % capacity == i) iff turn(i) == t;
//    readable by the consumer at ticket t iff turn(i) == t + 1; after reading, turn(i) = t + capacity.
//  - A slot stores turn(i) - i (modulo 2^64), so the initial state (turn(i) == i) is all zero bytes:
//    the mapping is left untouched at init and a page becomes resident only when a producer first
//    reaches one of its slots. A small run with a large ring costs a few pages, not the whole ring.
//  - No malloc, no lock, no syscall on the producer path (the memory is mapped once, up front).
// Thread-safety: try_push from any number of threads; try_pop/peek from exactly one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <sys/mman.h>

namespace gpumemtrace {

template <typename Record>
class Ring {
 public:
  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring() { release(); }

  // Allocates `capacity` slots (a power of two). Returns false when the memory cannot be mapped.
  // Not thread-safe; call before any producer runs (or in a fork child, where no other thread exists).
  [[nodiscard]] bool init(size_t capacity) {
    release();
    if (capacity < 2 || (capacity & (capacity - 1)) != 0) return false;
    // mmap, not malloc: the ring may be created inside a hook, and untouched pages cost no memory.
    // MAP_NORESERVE: the largest ring is gigabytes of address space that is mostly never touched;
    // it must not count against the commit limit. Fresh anonymous pages read as zero, which is
    // every slot's initial state (see the invariants above), so nothing is written here.
    void* mem = mmap(nullptr, capacity * sizeof(Slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    slots_ = static_cast<Slot*>(mem);
    capacity_ = capacity;
    mask_ = capacity - 1;
    head_.store(0, std::memory_order_relaxed);
    tail_ = 0;
    return true;
  }

  // Forgets every record in flight (fork child: the threads that held tickets do not exist there).
  // Dropping the pages returns every slot to its all-zero initial state and gives the memory back;
  // should that fail, the slots are rewritten one by one.
  void reset() {
    if (madvise(slots_, capacity_ * sizeof(Slot), MADV_DONTNEED) != 0)
      for (size_t i = 0; i < capacity_; ++i) slots_[i].turn.store(0, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
    tail_ = 0;
  }

  size_t capacity() const { return capacity_; }

  // Producer. Claims a ticket, lets `fill(record, sequence)` fill the slot in place, publishes it.
  // `sequence` = ticket + 1 (sequence numbers start at 1). Returns false, touching nothing, when full.
  template <typename Fill>
  bool try_push(Fill&& fill) {
    uint64_t ticket = head_.load(std::memory_order_relaxed);
    Slot* slot;
    for (;;) {
      slot = &slots_[ticket & mask_];
      const uint64_t turn = slot->turn.load(std::memory_order_acquire) + (ticket & mask_);
      const int64_t diff = static_cast<int64_t>(turn - ticket);
      if (diff == 0) {
        if (head_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // the consumer has not freed this slot yet: full
      } else {
        ticket = head_.load(std::memory_order_relaxed);  // another producer took it
      }
    }
    fill(slot->record, ticket + 1);
    slot->turn.store(ticket + 1 - (ticket & mask_), std::memory_order_release);
    return true;
  }

  // Consumer. Returns the next record in ticket order, or null when it is not published yet.
  // The pointer stays valid until pop().
  const Record* peek() const {
    Slot& slot = slots_[tail_ & mask_];
    if (slot.turn.load(std::memory_order_acquire) + (tail_ & mask_) != tail_ + 1) return nullptr;
    return &slot.record;
  }

  // Consumer. Releases the record returned by peek() to the producers.
  void pop() {
    Slot& slot = slots_[tail_ & mask_];
    slot.turn.store(tail_ + capacity_ - (tail_ & mask_), std::memory_order_release);
    ++tail_;
  }

  // Approximate number of records claimed but not yet consumed (for statistics only).
  uint64_t approx_size() const { return head_.load(std::memory_order_relaxed) - tail_; }

 private:
  // Cache-line aligned: a slot shares no line with its neighbours, so the producer filling one does not
  // take a line from under the consumer reading the one before.
  struct alignas(64) Slot {
    std::atomic<uint64_t> turn;  // turn(i) - i, see the invariants; zero-initialised by the mapping
    Record record;
  };

  void release() {
    if (slots_) munmap(slots_, capacity_ * sizeof(Slot));
    slots_ = nullptr;
    capacity_ = mask_ = 0;
  }

  Slot* slots_ = nullptr;
  size_t capacity_ = 0;
  size_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> head_{0};  // next ticket to hand out (producers)
  alignas(64) uint64_t tail_ = 0;              // next ticket to read (consumer only)
};

}  // namespace gpumemtrace
