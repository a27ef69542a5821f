// trace/json_line.cpp — the JSON line builder's string escaping (invalid UTF-8 becomes U+FFFD).
#include "trace/json_line.h"

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

}  // namespace

void JsonLine::append_escaped(const char* s) {
  static const char kHex[] = "0123456789abcdef";
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : "");
  put("\"", 1);
  while (*p) {
    // Copy the longest run that needs no escaping in one go (the common case: all of it).
    const unsigned char* run = p;
    while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') ++p;
    if (p > run) put(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
    const unsigned char c = *p;
    if (!c) break;
    if (c == '"' || c == '\\') {
      const char esc[2] = {'\\', static_cast<char>(c)};
      put(esc, 2);
      ++p;
    } else if (c < 0x20) {
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      put(esc, 6);
      ++p;
    } else {
      const int len = utf8_sequence_length(p);
      if (len == 0) {
        put("\xEF\xBF\xBD", 3);  // U+FFFD
        ++p;
      } else {
        put(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
        p += len;
      }
    }
  }
  put("\"", 1);
}

}  // namespace gpumemtrace
