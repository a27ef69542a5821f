// trace/json_line.cpp — the JSON line builder's string escaping (invalid UTF-8 becomes U+FFFD; long strings cut).
#include "trace/json_line.h"

#include "trace/format.h"

namespace gpumemtrace {
namespace {

// Length of the valid UTF-8 sequence starting at s, or 0 when it is not valid: overlong forms,
// surrogates (U+D800..U+DFFF) and code points above U+10FFFF are invalid (RFC 3629), as every strict
// JSON reader, ours included, treats them.
int utf8_sequence_length(const unsigned char* s) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  int len;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
  else return 0;
  for (int i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  static const uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// The length `s` has once written (invalid bytes become 3-byte U+FFFD), counted up to `stop`.
size_t decoded_length(const unsigned char* p, size_t stop) {
  size_t n = 0;
  while (*p && n <= stop) {
    const int len = *p < 0x80 ? 1 : utf8_sequence_length(p);
    n += len ? static_cast<size_t>(len) : 3;
    p += len ? len : 1;
  }
  return n;
}

}  // namespace

// Escapes what JSON requires. A string longer than format::kMaxStringBytes once written is cut at a
// character boundary and ends with format::kCutMark, the whole within the limit (the reader would
// cut it the same way; the writer never writes what its reader changes).
void JsonLine::append_escaped(const char* s) {
  static const char kHex[] = "0123456789abcdef";
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : "");
  // Decoded bytes allowed before the mark: unlimited unless the string can be too long (each byte
  // writes at most 3: a short string never is).
  size_t budget = SIZE_MAX;
  if (strnlen(reinterpret_cast<const char*>(p), format::kMaxStringBytes / 3 + 1) > format::kMaxStringBytes / 3 &&
      decoded_length(p, format::kMaxStringBytes) > format::kMaxStringBytes) {
    budget = format::kMaxStringBytes - strlen(format::kCutMark);
  }
  size_t decoded = 0;
  put("\"", 1);
  while (*p) {
    // Copy the longest run that needs no escaping in one go (the common case: all of it).
    const unsigned char* run = p;
    while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\' && decoded < budget) ++p, ++decoded;
    if (p > run) put(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
    const unsigned char c = *p;
    if (!c) break;
    const int len = c < 0x80 ? 1 : utf8_sequence_length(p);
    if (decoded + (len ? len : 3) > budget) {
      put(format::kCutMark, strlen(format::kCutMark));
      break;
    }
    decoded += len ? static_cast<size_t>(len) : 3;
    if (c == '"' || c == '\\') {
      const char esc[2] = {'\\', static_cast<char>(c)};
      put(esc, 2);
      ++p;
    } else if (c < 0x20) {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      put(esc, 6);
      ++p;
    } else if (len == 0) {
      put("\xEF\xBF\xBD", 3);  // U+FFFD
      ++p;
    } else {
      put(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
      p += len;
    }
  }
  put("\"", 1);
}

}  // namespace gpumemtrace
