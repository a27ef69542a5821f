// trace/json_line.h — builds one JSON object per line, fast, at the end of a string.
// The writer formats millions of lines; nlohmann/json would allocate per value, and many small
// std::string appends cost more than the rest of the writer together (bench: BM_SerializeEvent).
// So the builder reserves room and writes through a cursor, growing the string only when a long
// value needs it. Only what the trace needs: strings (escaped), integers, hex, raw.
// Thread-safety: one instance per thread; the string must not be touched until end().
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace gpumemtrace {

class JsonLine {
 public:
  explicit JsonLine(std::string* out) : out_(out), pos_(out->size()) {}

  JsonLine& begin(const char* type) {
    put("{\"type\":\"", 9);
    put(type, strlen(type));
    put("\"", 1);
    return *this;
  }
  // Starts a record without "type" whose first key is `k` (version 2 event lines: {"e":SITE,...}).
  JsonLine& begin_keyed(const char* k, uint64_t v) {
    put("{\"", 2);
    put(k, strlen(k));
    put("\":", 2);
    put_uint(v);
    return *this;
  }
  // Ends the line ("}\n") and trims the string to what was written.
  void end() {
    put("}\n", 2);
    out_->resize(pos_);
  }

  JsonLine& key(const char* k) {
    const size_t n = strlen(k);
    char* p = room(n + 4);
    p[0] = ',';
    p[1] = '"';
    memcpy(p + 2, k, n);
    p[n + 2] = '"';
    p[n + 3] = ':';
    pos_ += n + 4;
    return *this;
  }
  JsonLine& str(const char* k, const char* v) {
    key(k);
    append_escaped(v);
    return *this;
  }
  JsonLine& str(const char* k, const std::string& v) { return str(k, v.c_str()); }
  JsonLine& num(const char* k, int64_t v) {
    key(k);
    if (v < 0) {
      put("-", 1);
      put_uint(static_cast<uint64_t>(-(v + 1)) + 1);
    } else {
      put_uint(static_cast<uint64_t>(v));
    }
    return *this;
  }
  JsonLine& unum(const char* k, uint64_t v) {
    key(k);
    put_uint(v);
    return *this;
  }
  // A 64-bit value as the string "0x..." (JSON readers using doubles cannot hold it as a number).
  JsonLine& hex(const char* k, uint64_t v) {
    key(k);
    static const char kHex[] = "0123456789abcdef";
    char buf[20];
    int i = 20;
    do {
      buf[--i] = kHex[v & 15];
      v >>= 4;
    } while (v);
    char* p = room(24 - i);
    p[0] = '"';
    p[1] = '0';
    p[2] = 'x';
    memcpy(p + 3, buf + i, 20 - i);
    p[23 - i] = '"';
    pos_ += 24 - i;
    return *this;
  }
  // `"k":true`
  JsonLine& flag(const char* k) {
    key(k);
    put("true", 4);
    return *this;
  }
  // Raw JSON value (already well formed), e.g. a list built by the caller.
  JsonLine& raw(const char* k, const std::string& json) {
    key(k);
    put(json.data(), json.size());
    return *this;
  }

  // Appends `s` to `out` as a JSON string literal (quotes included), escaping what JSON requires.
  // Bytes that are not valid UTF-8 become U+FFFD, so every reader accepts the line; a string longer
  // than format::kMaxStringBytes is cut and marked (format.h), as every reader would cut it.
  static void append_string(std::string* out, const char* s) {
    JsonLine j(out);
    j.append_escaped(s);
    out->resize(j.pos_);
  }
  static void append_uint(std::string* out, uint64_t v) {
    JsonLine j(out);
    j.put_uint(v);
    out->resize(j.pos_);
  }

 private:
  // Makes room for n more bytes and returns where they go. resize() zero-fills what it adds, so
  // grow by a small margin only; the string's capacity still grows geometrically underneath.
  char* room(size_t n) {
    if (pos_ + n > out_->size()) out_->resize(pos_ + n + 256);
    return &(*out_)[pos_];
  }
  void put(const char* s, size_t n) {
    memcpy(room(n), s, n);
    pos_ += n;
  }
  void put_uint(uint64_t v) {
    char buf[20];
    int i = 20;
    do {
      buf[--i] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    put(buf + i, 20 - i);
  }
  void append_escaped(const char* s);

  std::string* out_;
  size_t pos_;
};

}  // namespace gpumemtrace
