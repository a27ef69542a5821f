// trace/alloc_conf.h — what an allocator settings text may carry into a trace: PyTorch's
// caching-allocator options only (PYTORCH_CUDA_ALLOC_CONF syntax), everything else left out.
//
// The recorder writes such texts in two places (docs/trace-format.md): the header, from the
// environment the process started with (PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF,
// PYTORCH_HIP_ALLOC_CONF), and the "allocator_settings" records the PyTorch hook reports. A variable
// holds whatever was put there; a trace is a file people share. So the text is rebuilt from its
// parts: each `key:value` (or `key:[...]`) item is kept only when its key is one of the allocator's
// options below and every value token is a plain word ([A-Za-z0-9._+-], and `>` inside a list), and
// the kept items are joined with ',' (spaces dropped, as PyTorch's tokenizer drops them). Anything
// else (another key, a malformed item, a value that is not a plain word) is left out, not copied.
//
// The keys: the union of the options of the releases read (pytorch/pytorch
// c10/cuda/CUDAAllocatorConfig.{h,cpp} and c10/core/AllocatorConfig.{h,cpp}; docs/pytorch.md,
// "Allocator settings", cites the commits).
//
// No allocation, no lock (the recorder's rules): the result is written into the caller's buffer.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpumemtrace::alloc_conf {

inline constexpr std::string_view kKeys[] = {
    "backend",                       // native | cudaMallocAsync
    "expandable_segments",
    "expandable_segments_handle_type",
    "max_split_size_mb",
    "max_non_split_rounding_mb",
    "large_segment_size_mb",
    "garbage_collection_threshold",
    "roundup_power2_divisions",
    "per_process_memory_fraction",   // newer releases: the cap as an option
    "throw_on_cudamalloc_oom",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "graph_capture_record_stream_reuse",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "pinned_reserve_segment_size_mb",
    "pinned_free_catch_all",
};

// A value longer than this is not a setting: left out.
inline constexpr size_t kMaxValueBytes = 64;

inline bool is_key(std::string_view key) {
  for (std::string_view k : kKeys) {
    if (k == key) return true;
  }
  return false;
}

namespace detail {

inline bool special(char c) { return c == ',' || c == ':' || c == '[' || c == ']'; }
inline bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
inline bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '+' || c == '-';
}

// PyTorch's tokens (lexArgs / ConfigTokenizer): ',', ':', '[' and ']' alone, runs of other
// characters (spaces dropped) as words.
class Tokens {
 public:
  explicit Tokens(std::string_view text) : text_(text) {}
  // The next token, "" at the end. A word keeps its spaces out: "max split" is one word
  // "maxsplit" in PyTorch; here such a word is simply not a plain word (spaces are checked).
  std::string_view next() {
    while (at_ < text_.size() && space(text_[at_])) ++at_;
    if (at_ >= text_.size()) return {};
    const size_t start = at_;
    if (special(text_[at_])) return text_.substr(at_++, 1);
    while (at_ < text_.size() && !special(text_[at_])) ++at_;
    std::string_view w = text_.substr(start, at_ - start);
    while (!w.empty() && space(w.back())) w.remove_suffix(1);
    return w;
  }

 private:
  std::string_view text_;
  size_t at_ = 0;
};

inline bool plain(std::string_view w, bool in_list) {
  if (w.empty() || w.size() > kMaxValueBytes) return false;
  for (char c : w) {
    if (!word_char(c) && !(in_list && c == '>')) return false;
  }
  return true;
}

}  // namespace detail

// Writes the kept items of `text` into out[0, out_size) NUL-terminated; returns their length (0: none
// kept). An item that does not fit whole is left out, with everything after it.
inline size_t sanitize(std::string_view text, char* out, size_t out_size) {
  using detail::plain;
  if (!out || out_size == 0) return 0;
  size_t n = 0;
  out[0] = '\0';
  detail::Tokens tokens(text);
  char item[4 * kMaxValueBytes];
  bool full = false;
  std::string_view t = tokens.next();
  while (!t.empty() && !full) {
    // One item: key ':' (word | '[' ... ']'), up to the ',' that ends it.
    size_t len = 0;
    bool ok = plain(t, false) && !detail::special(t[0]) && is_key(t);
    auto put = [&](std::string_view s) {
      if (len + s.size() >= sizeof(item)) {
        ok = false;
        return;
      }
      for (char c : s) item[len++] = c;
    };
    put(t);
    t = tokens.next();
    if (t != ":") ok = false;
    put(":");
    t = tokens.next();
    if (t == "[") {
      put("[");
      for (t = tokens.next(); !t.empty() && t != "]"; t = tokens.next()) {
        if (!(t == ":" || t == "," || plain(t, true))) ok = false;
        put(t);
      }
      if (t != "]") ok = false;
      put("]");
      t = tokens.next();
    } else if (!t.empty() && !detail::special(t[0])) {
      if (!plain(t, false)) ok = false;
      put(t);
      t = tokens.next();
    } else {
      ok = false;
    }
    // Whatever follows up to the next ',' belongs to this item: a well-formed item has nothing.
    while (!t.empty() && t != ",") {
      ok = false;
      t = tokens.next();
    }
    if (t == ",") t = tokens.next();
    if (!ok) continue;
    const size_t need = len + (n ? 1 : 0);
    if (n + need >= out_size) {
      full = true;
      break;
    }
    if (n) out[n++] = ',';
    for (size_t i = 0; i < len; ++i) out[n++] = item[i];
    out[n] = '\0';
  }
  return n;
}

}  // namespace gpumemtrace::alloc_conf
