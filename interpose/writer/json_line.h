// interpose/writer/json_line.h — builds one JSON object per line, fast, into a reusable buffer.
// The writer formats millions of lines; nlohmann/json would allocate per value. Only what the trace
// needs: strings (escaped), integers, hex strings, nested lists.
// Thread-safety: one instance per thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpumemtrace {

class JsonLine {
 public:
  explicit JsonLine(std::string* out) : out_(out) {}

  JsonLine& begin(const char* type) {
    out_->append("{\"type\":\"");
    out_->append(type);
    out_->push_back('"');
    return *this;
  }
  void end() { out_->append("}\n"); }

  JsonLine& key(const char* k) {
    out_->append(",\"");
    out_->append(k);
    out_->append("\":");
    return *this;
  }
  JsonLine& str(const char* k, const char* v) { key(k); append_string(v); return *this; }
  JsonLine& str(const char* k, const std::string& v) { return str(k, v.c_str()); }
  JsonLine& num(const char* k, int64_t v) { key(k); append_int(v); return *this; }
  JsonLine& unum(const char* k, uint64_t v) { key(k); append_uint(v); return *this; }
  JsonLine& hex(const char* k, uint64_t v) {
    key(k);
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "\"0x%llx\"", static_cast<unsigned long long>(v));
    out_->append(buf, n);
    return *this;
  }
  // Raw JSON value (already well formed), e.g. a list built by the caller.
  JsonLine& raw(const char* k, const std::string& json) { key(k); out_->append(json); return *this; }

  // Appends `s` as a JSON string literal (quotes included), escaping what JSON requires. Bytes that
  // are not valid UTF-8 are replaced by U+FFFD so every reader accepts the line.
  static void append_string(std::string* out, const char* s);
  void append_string(const char* s) { append_string(out_, s); }
  void append_uint(uint64_t v) { append_uint(out_, v); }
  void append_int(int64_t v) {
    if (v < 0) {
      out_->push_back('-');
      append_uint(out_, static_cast<uint64_t>(-(v + 1)) + 1);
    } else {
      append_uint(out_, static_cast<uint64_t>(v));
    }
  }
  static void append_uint(std::string* out, uint64_t v) {
    char buf[24];
    int i = 24;
    do {
      buf[--i] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    out->append(buf + i, 24 - i);
  }

 private:
  std::string* out_;
};

}  // namespace gpumemtrace
