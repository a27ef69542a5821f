// interpose/python/python_code_table.h — a fixed-size, lock-free table of the code objects seen in
// captured stacks, holding COPIES of their file name, function name and line table.
//
// Why copies: the writer thread resolves a captured frame long after the capture, when the function
// may have been deleted and its code object freed (a lambda, an exec()'d function, a module unloaded),
// and its address reused by another object. Reading Python memory then would be a use-after-free. So
// the capturing thread — the one moment the code object is guaranteed alive, because its own running
// frame holds a reference — copies what resolution needs into memory the library owns and never frees.
// After that, capture only looks the code object up (a hash probe and a few compares), and resolution
// never touches Python memory at all.
//
// Address reuse: an entry's identity is (code pointer, co_filename object, name object, line table
// object, co_firstlineno), all compared on every hit; a new code object at a reused address differs
// in at least the line table object (owned by the code object, freed with it) unless that address
// was reused too, so it gets its own entry. (Comparing the line table's contents as well would close
// that last gap but reads one more object per frame on the hot path, a large share of a capture.)
//
// Thread-safety: lookup_or_insert() may run concurrently on any threads (CAS on the entry's key, then
// a release store of `ready`); it never allocates, locks or blocks (when another thread is filling the
// same entry: at most 4096 `pause` instructions, 10 us to 0.2 ms depending on the CPU, then it gives
// up and the frame is left out). The entry getters are
// safe from any thread for an index lookup_or_insert() returned (the ring's hand-off orders them).
// Memory: reserved with mmap on first use (MAP_NORESERVE; untouched pages cost nothing); entries are
// never evicted. When the table or the string arena is full, frames of new code objects are dropped
// (counted, one warning).
#pragma once

#include <cstdint>
#include <string>

#include "interpose/python/python_offsets.h"

namespace gpumemtrace::python {

inline constexpr uint32_t kCodeTableSlots = 1u << 15;       // distinct code objects
inline constexpr size_t kCodeArenaBytes = size_t(64) << 20;  // strings + line tables (virtual)
inline constexpr uint32_t kMaxLineTableBytes = 64 * 1024;    // longer tables: line = co_firstlineno

// Reserves the memory (idempotent; call before the first lookup). False when mmap failed.
bool code_table_init(const PythonOffsets* offsets, const void* code_type, const void* unicode_type,
                     const void* bytes_type);

// Capturing thread. Returns entry index + 1, or 0 when the table/arena is full or the object is not
// what the offsets say (then the frame is skipped). `code` must be alive (held by a running frame).
uint32_t code_table_lookup_or_insert(uintptr_t code);

// Frames that do not come from the running interpreter (PyTorch's allocator history reports file,
// function and line as text, long after the fact): an entry keyed by the strings' hash. Any thread;
// copies the strings; same bounds and failure rules as above. Works whether or not the frame reader
// is enabled (reserves the table on first use). Returns id + 1 or 0.
uint32_t code_table_insert_external(const char* file, size_t file_len, const char* function, size_t function_len);

// Any thread, for an id returned above. Text is UTF-8.
struct CodeInfo {
  const char* file;
  uint32_t file_len;
  const char* function;
  uint32_t function_len;
};
bool code_table_get(uint32_t id, CodeInfo* out);

// Line number of byte offset `lasti` in the code object `id` (decoded from the copied line table, in
// the running version's format). Falls back to co_firstlineno when unknown.
int code_table_line(uint32_t id, int64_t lasti);

// Entries in use (the tests check the table stays bounded).
uint64_t code_table_entries();

}  // namespace gpumemtrace::python
