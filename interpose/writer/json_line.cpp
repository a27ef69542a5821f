// interpose/writer/json_line.cpp
#include "interpose/writer/json_line.h"

namespace gpumemtrace {
namespace {

// Length of the valid UTF-8 sequence starting at s, or 0 when it is not valid.
int utf8_sequence_length(const unsigned char* s) {
  const unsigned char c = s[0];
  int len;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) len = 2;
  else if ((c & 0xF0) == 0xE0) len = 3;
  else if ((c & 0xF8) == 0xF0) len = 4;
  else return 0;
  for (int i = 1; i < len; ++i)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (len == 2 && c < 0xC2) return 0;  // overlong
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
