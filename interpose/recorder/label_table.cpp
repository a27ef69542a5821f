// interpose/recorder/label_table.cpp — the interned long labels (see label_table.h).
#include "interpose/recorder/label_table.h"

#include <atomic>
#include <cstdint>
#include <cstring>

namespace gpumemtrace {
namespace {

// A name that finds no free or matching slot within this many probes is treated as "table full":
// linear probing stays short while the table is below ~90% full.
constexpr size_t kMaxProbes = 64;

// Zero-initialised statics (constant initialisation): usable from the first call, before main() too.
std::atomic<const char*> g_slots[kLabelTableSlots];
alignas(64) char g_arena[kLabelArenaBytes];
std::atomic<size_t> g_arena_used{0};

uint64_t fnv1a(const char* text, size_t length) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < length; ++i) h = (h ^ static_cast<unsigned char>(text[i])) * 1099511628211ull;
  return h;
}

// A NUL-terminated copy of text[0, length) in the arena, or null when the arena is used up.
char* arena_copy(const char* text, size_t length) {
  const size_t need = length + 1;
  const size_t at = g_arena_used.fetch_add(need, std::memory_order_relaxed);
  if (at + need > kLabelArenaBytes) return nullptr;  // used up (the counter may run past the end)
  char* copy = g_arena + at;
  memcpy(copy, text, length);
  copy[length] = '\0';
  return copy;
}

bool same_text(const char* entry, const char* text, size_t length) {
  return memcmp(entry, text, length) == 0 && entry[length] == '\0';
}

}  // namespace

bool is_interned_label(const void* p) noexcept {
  const size_t used = g_arena_used.load(std::memory_order_acquire);
  const char* const end = g_arena + (used < kLabelArenaBytes ? used : kLabelArenaBytes);
  const char* const at = static_cast<const char*>(p);
  return at >= g_arena && at < end;
}

const char* intern_label(const char* text, size_t length) noexcept {
  if (length > kMaxScopeNameBytes) return nullptr;
  const uint64_t hash = fnv1a(text, length);
  const char* copy = nullptr;  // made once, when a free slot is first found
  for (size_t probe = 0; probe < kMaxProbes; ++probe) {
    std::atomic<const char*>& slot = g_slots[(hash + probe) & (kLabelTableSlots - 1)];
    const char* entry = slot.load(std::memory_order_acquire);
    if (entry == nullptr) {
      if (copy == nullptr && (copy = arena_copy(text, length)) == nullptr) return nullptr;
      // Release: the text is complete before another thread can find the pointer.
      if (slot.compare_exchange_strong(entry, copy, std::memory_order_acq_rel, std::memory_order_acquire))
        return copy;
      // Another thread filled the slot first; `entry` is its name (maybe ours: then `copy` is wasted).
    }
    if (same_text(entry, text, length)) return entry;
  }
  return nullptr;
}

size_t utf8_cut(const char* text, size_t length) noexcept {
  // Back up over continuation bytes (10xxxxxx) to the lead byte of the last character; keep that
  // character only when all its bytes are inside the cut.
  size_t start = length;
  while (start > 0 && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80 && length - start < 3)
    --start;
  if (start == 0) return length;
  const unsigned char lead = static_cast<unsigned char>(text[start - 1]);
  const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return length - (start - 1) >= want ? length : start - 1;
}

}  // namespace gpumemtrace
