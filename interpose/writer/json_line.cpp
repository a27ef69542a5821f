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

void JsonLine::append_string(std::string* out, const char* s) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : "");
  while (*p) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++p;
    } else if (c < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
      ++p;
    } else if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++p;
    } else {
      const int len = utf8_sequence_length(p);
      if (len == 0) {
        out->append("\xEF\xBF\xBD");  // U+FFFD
        ++p;
      } else {
        out->append(reinterpret_cast<const char*>(p), len);
        p += len;
      }
    }
  }
  out->push_back('"');
}

}  // namespace gpumemtrace
