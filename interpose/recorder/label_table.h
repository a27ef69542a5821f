// interpose/recorder/label_table.h — scope names longer than an event's inline label, interned.
//
// A ring slot holds a 48-byte label inline (event_record.h); a scope's name (a pytest node id) can be
// hundreds of bytes. Growing every slot for the few events that carry a name would cost every
// allocation event the copy, so instead each distinct long name is copied once into a fixed arena
// and kept for the life of the process: the event carries a pointer to it (kLabelInterned), and the
// writer reads the text from there.
//
// No malloc, no lock: open addressing over a fixed array of atomic pointers, a bump arena in .bss
// (its pages cost memory only once written). Names are never removed, so a pointer handed out stays
// valid forever (also in a fork child). When the arena is used up or a name finds no free slot within
// a few probes, intern_label() returns null and the caller keeps the truncated inline label instead.
// Thread-safety: intern_label() may be called from any thread at any time; concurrent calls with the
// same text return the same pointer.
#pragma once

#include <cstddef>

namespace gpumemtrace {

// Longest scope name kept whole, in bytes, NUL excluded; longer names are cut there (at a UTF-8
// character boundary). docs/trace-format.md documents the limit.
inline constexpr size_t kMaxScopeNameBytes = 1023;

// Capacity: distinct interned names, and the bytes of their text (NULs included).
inline constexpr size_t kLabelTableSlots = size_t{1} << 15;
inline constexpr size_t kLabelArenaBytes = size_t{8} << 20;

// The interned copy of text[0, length), NUL-terminated; null when the table is full.
// Precondition: length <= kMaxScopeNameBytes.
const char* intern_label(const char* text, size_t length) noexcept;

// True when `p` points into the interned names (a pointer intern_label handed out, or one inside
// such a name): readable, and NUL-terminated before the arena ends. For handles the program hands
// back (NVTX domain and registered-string handles), which must never be read unless they are ours.
bool is_interned_label(const void* p) noexcept;

// `length` shortened, if needed, so that text[0, result) does not end inside a UTF-8 sequence.
size_t utf8_cut(const char* text, size_t length) noexcept;

}  // namespace gpumemtrace
