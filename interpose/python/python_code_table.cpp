// interpose/python/python_code_table.cpp — see python_code_table.h.
#include "interpose/python/python_code_table.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "interpose/recorder/recorder.h"

namespace gpumemtrace::python {
namespace {

struct Entry {
  std::atomic<uintptr_t> code{0};   // key; claimed by CAS 0 -> code pointer
  std::atomic<uint32_t> ready{0};   // 1 once every field below is written (release); 2: failed
  int32_t first_line = 0;
  uintptr_t filename_obj = 0;       // identity, against address reuse
  uintptr_t name_obj = 0;
  uintptr_t linetable_obj = 0;
  uint32_t file_off = 0, file_len = 0;
  uint32_t func_off = 0, func_len = 0;
  uint32_t lt_off = 0, lt_len = 0;
};

const PythonOffsets* g_off = nullptr;
uintptr_t g_code_type = 0, g_unicode_type = 0, g_bytes_type = 0;
// Published once by code_table_init() (release) with the arena it precedes; null until then.
std::atomic<Entry*> g_entries{nullptr};
char* g_arena = nullptr;
std::atomic<size_t> g_arena_used{0};
std::atomic<uint64_t> g_count{0};
std::atomic<bool> g_warned{false};
std::mutex g_init_mutex;

inline uintptr_t rd_ptr(uintptr_t a) { return *reinterpret_cast<const uintptr_t*>(a); }
inline int32_t rd_i32(uintptr_t a) { return *reinterpret_cast<const int32_t*>(a); }
inline uint32_t rd_u32(uintptr_t a) { return *reinterpret_cast<const uint32_t*>(a); }
inline int64_t rd_i64(uintptr_t a) { return *reinterpret_cast<const int64_t*>(a); }

void overflow() {
  if (!g_warned.exchange(true))
    log_line("Python code table full: frames of further functions are left out of stacks");
}

// Bump allocation in the arena; never freed. nullptr when full.
char* arena_alloc(size_t n, uint32_t* off) {
  size_t at = g_arena_used.fetch_add(n, std::memory_order_relaxed);
  if (at + n > kCodeArenaBytes || at > UINT32_MAX) return nullptr;
  *off = static_cast<uint32_t>(at);
  return g_arena + at;
}

// UTF-8 length of a code point.
inline int utf8_len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }
inline char* utf8_put(char* p, uint32_t c) {
  if (c < 0x80) {
    *p++ = static_cast<char>(c);
  } else if (c < 0x800) {
    *p++ = static_cast<char>(0xC0 | (c >> 6));
    *p++ = static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *p++ = static_cast<char>(0xE0 | (c >> 12));
    *p++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    *p++ = static_cast<char>(0x80 | (c & 0x3F));
  } else {
    *p++ = static_cast<char>(0xF0 | (c >> 18));
    *p++ = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    *p++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    *p++ = static_cast<char>(0x80 | (c & 0x3F));
  }
  return p;
}

// Copies a live str object into the arena as UTF-8. Only compact strings (every identifier and
// co_filename is one); anything else copies as "?". False when the arena is full.
bool copy_str(uintptr_t obj, uint32_t* off, uint32_t* len) {
  static const char kUnknown[] = "?";
  const char* src = kUnknown;
  size_t n = 1;
  int kind = 1;
  bool ascii = true;
  if (obj != 0 && rd_ptr(obj + kObType) == g_unicode_type) {
    uint32_t state = rd_u32(obj + kUnicodeState);
    int64_t length = rd_i64(obj + kUnicodeLength);
    bool compact = (state >> 5) & 1;
    if (compact && length >= 0 && length <= 4096) {
      ascii = (state >> 6) & 1;
      kind = (state >> 2) & 7;
      src = reinterpret_cast<const char*>(obj + (ascii ? g_off->ascii_size : g_off->compact_size));
      n = static_cast<size_t>(length);
      if (!ascii && kind != 1 && kind != 2 && kind != 4) src = kUnknown, n = 1, ascii = true;
    }
  }
  if (ascii) {
    char* dst = arena_alloc(n, off);
    if (!dst) return false;
    memcpy(dst, src, n);
    *len = static_cast<uint32_t>(n);
    return true;
  }
  auto cp = [&](size_t i) -> uint32_t {
    if (kind == 1) return reinterpret_cast<const uint8_t*>(src)[i];
    if (kind == 2) return reinterpret_cast<const uint16_t*>(src)[i];
    return reinterpret_cast<const uint32_t*>(src)[i];
  };
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += utf8_len(cp(i));
  char* dst = arena_alloc(bytes, off);
  if (!dst) return false;
  char* p = dst;
  for (size_t i = 0; i < n; ++i) p = utf8_put(p, cp(i));
  *len = static_cast<uint32_t>(bytes);
  return true;
}

// Size of a line table object; -1 when it is not a bytes object.
int64_t line_table_size(uintptr_t lt) {
  if (lt == 0 || rd_ptr(lt + kObType) != g_bytes_type) return -1;
  return rd_i64(lt + kObSize);
}

bool fill(Entry* e, uintptr_t filename, uintptr_t name, uintptr_t lt, int first) {
  e->first_line = first;
  e->filename_obj = filename;
  e->name_obj = name;
  e->linetable_obj = lt;
  if (!copy_str(filename, &e->file_off, &e->file_len)) return false;
  if (!copy_str(name, &e->func_off, &e->func_len)) return false;
  e->lt_len = 0;
  {
    const int64_t n = line_table_size(lt);
    if (n > 0 && n <= kMaxLineTableBytes) {
      char* dst = arena_alloc(static_cast<size_t>(n), &e->lt_off);
      if (!dst) return false;
      memcpy(dst, reinterpret_cast<const void*>(lt + kBytesData), static_cast<size_t>(n));
      e->lt_len = static_cast<uint32_t>(n);
    }
  }
  return true;
}

inline uint32_t hash_ptr(uintptr_t p) {
  uint64_t x = p * 0x9e3779b97f4a7c15ull;
  return static_cast<uint32_t>(x >> 40);
}

// The one probe loop of both entry kinds. Linear probing from hash(key): an empty slot is claimed by
// CAS and filled (`fill(e)`; false = arena full: the slot stays claimed, marked failed, and lookups of
// that key give up at once); a slot holding `key` is waited for (another thread may be filling it)
// and then taken when `same(e)` says it describes the same object (an address may be reused).
// Returns entry index + 1, or 0.
template <typename Fill, typename Same>
uint32_t find_or_claim(Entry* entries, uintptr_t key, Fill fill_entry, Same same) {
  constexpr uint32_t kMask = kCodeTableSlots - 1;
  constexpr int kMaxProbe = 64;
  // A fill copies a few hundred bytes; 4096 pauses bound the wait without ever blocking: about
  // 10 us where `pause` takes ~10 cycles, up to ~0.2 ms where it takes ~140 (Skylake and later).
  constexpr int kMaxSpins = 4096;
  const uint32_t h = hash_ptr(key);
  for (int probe = 0; probe < kMaxProbe; ++probe) {
    const uint32_t idx = (h + probe) & kMask;
    Entry* e = &entries[idx];
    uintptr_t k = e->code.load(std::memory_order_acquire);
    if (k == 0) {
      if (e->code.compare_exchange_strong(k, key, std::memory_order_acq_rel)) {
        if (!fill_entry(e)) {
          e->ready.store(2, std::memory_order_release);
          overflow();
          return 0;
        }
        e->ready.store(1, std::memory_order_release);
        g_count.fetch_add(1, std::memory_order_relaxed);
        return idx + 1;
      }
      // Lost the race: `k` now holds the winner's key.
    }
    if (k != key) continue;
    int spins = 0;
    while (e->ready.load(std::memory_order_acquire) == 0 && ++spins < kMaxSpins) __builtin_ia32_pause();
    if (e->ready.load(std::memory_order_acquire) != 1) return 0;
    if (same(*e)) return idx + 1;
    // Same key, different object (the old one was freed): keep probing.
  }
  overflow();
  return 0;
}

// ---- line tables ----

// 3.9: co_lnotab, pairs (byte offset increment, signed line increment). CPython's PyCode_Addr2Line.
int decode_lnotab(const uint8_t* p, uint32_t len, int line, int64_t lasti) {
  int64_t addr = 0;
  for (uint32_t i = 0; i + 1 < len; i += 2) {
    addr += p[i];
    if (addr > lasti) break;
    line += static_cast<int8_t>(p[i + 1]);
  }
  return line;
}

// 3.10: PEP 626 co_linetable, pairs (byte length, signed line delta; -128 = no line).
int decode_linetable_310(const uint8_t* p, uint32_t len, int first, int64_t lasti) {
  int64_t start = 0;
  int line = first;
  for (uint32_t i = 0; i + 1 < len; i += 2) {
    int64_t end = start + p[i];
    int8_t d = static_cast<int8_t>(p[i + 1]);
    int range_line = -1;
    if (d != -128) {
      line += d;
      range_line = line;
    }
    if (lasti >= start && lasti < end) return range_line;
    start = end;
  }
  return -1;
}

// 3.11+: the location table (Objects/locations.md). Entries start with a byte with bit 7 set:
// code = bits 3-6, length = bits 0-2 + 1 code units (2 bytes each).
int read_varint(const uint8_t* p, uint32_t len, uint32_t* i) {
  uint32_t v = 0;
  int shift = 0;
  while (*i < len) {
    uint8_t b = p[(*i)++];
    v |= static_cast<uint32_t>(b & 63) << shift;
    shift += 6;
    if (!(b & 64) || shift > 30) break;
  }
  return static_cast<int>(v);
}
int read_svarint(const uint8_t* p, uint32_t len, uint32_t* i) {
  uint32_t v = static_cast<uint32_t>(read_varint(p, len, i));
  return (v & 1) ? -static_cast<int>(v >> 1) : static_cast<int>(v >> 1);
}

int decode_locations(const uint8_t* p, uint32_t len, int first, int64_t lasti) {
  int64_t start = 0;
  int line = first;
  uint32_t i = 0;
  while (i < len) {
    uint8_t b = p[i];
    if (!(b & 128)) {  // not an entry start: resynchronise
      ++i;
      continue;
    }
    int code = (b >> 3) & 15;
    int64_t end = start + ((b & 7) + 1) * 2;
    uint32_t j = i + 1;
    int delta = 0;
    if (code == 13 || code == 14) delta = read_svarint(p, len, &j);
    else if (code >= 10 && code <= 12) delta = code - 10;
    line += delta;
    if (lasti >= start && lasti < end) return code == 15 ? -1 : line;
    start = end;
    // skip to the next entry start
    for (i = i + 1; i < len && !(p[i] & 128); ++i) {
    }
  }
  return -1;
}

// The line of byte offset `lasti` in `table` (format of 3.<minor>); first_line when unknown.
int decode_line(int minor, const uint8_t* table, uint32_t len, int first_line, int64_t lasti) {
  if (lasti < 0 || table == nullptr || len == 0) return first_line;
  int line;
  if (minor <= 9) line = decode_lnotab(table, len, first_line, lasti);
  else if (minor == 10) line = decode_linetable_310(table, len, first_line, lasti);
  else line = decode_locations(table, len, first_line, lasti);
  return line < 0 ? first_line : line;
}

}  // namespace

bool code_table_init(const PythonOffsets* offsets, const void* code_type, const void* unicode_type,
                     const void* bytes_type) {
  if (offsets) {
    // Written before the frame reader's state turns ready (release), read after (acquire).
    g_off = offsets;
    g_code_type = reinterpret_cast<uintptr_t>(code_type);
    g_unicode_type = reinterpret_cast<uintptr_t>(unicode_type);
    g_bytes_type = reinterpret_cast<uintptr_t>(bytes_type);
  }
  if (g_entries.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(g_init_mutex);  // init only: never on the capture path
  if (g_entries.load(std::memory_order_relaxed)) return true;
  size_t table_bytes = sizeof(Entry) * kCodeTableSlots;
  void* t = mmap(nullptr, table_bytes + kCodeArenaBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (t == MAP_FAILED) return false;
  // Zero-filled pages are a valid empty table (std::atomic of integers: all-zero = 0).
  g_arena = static_cast<char*>(t) + table_bytes;
  g_entries.store(static_cast<Entry*>(t), std::memory_order_release);
  return true;
}

uint32_t code_table_lookup_or_insert(uintptr_t code) {
  Entry* const entries = g_entries.load(std::memory_order_acquire);
  if (!entries || !g_off || code == 0) return 0;
  const PythonOffsets& o = *g_off;
  if (rd_ptr(code + kObType) != g_code_type) return 0;
  uintptr_t filename = rd_ptr(code + o.code_filename);
  uintptr_t name = rd_ptr(code + o.code_name);
  uintptr_t lt = rd_ptr(code + o.code_linetable);
  int first = rd_i32(code + o.code_firstlineno);
  // Identity on a hit compares only what the code object itself holds (no read of the line table's
  // contents: one more object read per frame on the hot path; make bench-python shows its cost).
  return find_or_claim(
      entries, code, [&](Entry* e) { return fill(e, filename, name, lt, first); },
      [&](const Entry& e) {
        return e.filename_obj == filename && e.name_obj == name && e.linetable_obj == lt &&
               e.first_line == first;
      });
}

uint32_t code_table_insert_external(const char* file, size_t file_len, const char* function,
                                    size_t function_len) {
  if (!code_table_init(nullptr, nullptr, nullptr, nullptr)) return 0;
  Entry* const entries = g_entries.load(std::memory_order_acquire);
  if (file_len > 4096) file_len = 4096;
  if (function_len > 4096) function_len = 4096;
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < file_len; ++i) h1 = (h1 ^ uint8_t(file[i])) * 1099511628211ull;
  h1 = (h1 ^ 0xff) * 1099511628211ull;
  for (size_t i = 0; i < function_len; ++i) h2 = (h2 ^ uint8_t(function[i])) * 1099511628211ull;
  // Odd keys: a real code object is 8-byte aligned, so external entries never meet real ones.
  const uintptr_t key = static_cast<uintptr_t>(h1 ^ (h2 << 1)) | 1;
  const uintptr_t check = static_cast<uintptr_t>(h2);
  return find_or_claim(
      entries, key,
      [&](Entry* e) {
        e->first_line = 0;
        e->filename_obj = check;
        e->name_obj = 0;
        e->linetable_obj = 0;
        e->lt_len = 0;
        char* f = arena_alloc(file_len, &e->file_off);
        char* g = f ? arena_alloc(function_len, &e->func_off) : nullptr;
        if (!g) return false;
        memcpy(f, file, file_len);
        memcpy(g, function, function_len);
        e->file_len = static_cast<uint32_t>(file_len);
        e->func_len = static_cast<uint32_t>(function_len);
        return true;
      },
      [&](const Entry& e) { return e.filename_obj == check; });
}

bool code_table_get(uint32_t id, CodeInfo* out) {
  const Entry* const entries = g_entries.load(std::memory_order_acquire);
  if (!entries || id == 0 || id > kCodeTableSlots) return false;
  const Entry& e = entries[id - 1];
  if (e.ready.load(std::memory_order_acquire) != 1) return false;
  out->file = g_arena + e.file_off;
  out->file_len = e.file_len;
  out->function = g_arena + e.func_off;
  out->function_len = e.func_len;
  return true;
}

int code_table_line(uint32_t id, int64_t lasti) {
  const Entry* const entries = g_entries.load(std::memory_order_acquire);
  if (!entries || id == 0 || id > kCodeTableSlots) return 0;
  const Entry& e = entries[id - 1];
  if (e.ready.load(std::memory_order_acquire) != 1) return 0;
  if (!g_off) return e.first_line;
  return decode_line(g_off->minor, reinterpret_cast<const uint8_t*>(g_arena + e.lt_off), e.lt_len,
                     e.first_line, lasti);
}

uint64_t code_table_entries() { return g_count.load(std::memory_order_relaxed); }

}  // namespace gpumemtrace::python
