// util/terminal_text.h — text from a trace made safe for a terminal or a CI log.
//
// Names in a trace (functions, files, labels, scope names, pool names, the command line) are the
// traced program's, and may hold control characters: ESC sequences that clear the screen or move the
// cursor, carriage returns that overwrite a leak's site in a CI log, newlines that forge a line of
// their own ("FAILED: ..."). Before such text reaches a terminal, every control character — C0
// (U+0000..U+001F), DEL and C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F) — is shown as an escape instead:
// `\n`, `\r`, `\t`, `\x1b`, `\u009b`. The JSON, HTML and Perfetto outputs escape by their own rules
// and keep names exact.
//
// printable(): one name (everything escaped, newlines included).
// TerminalStreambuf: a whole stream (the text report, stderr): everything but '\n' escaped, so the
// report's own line structure stays and nothing else gets through.
// Header-only. Thread-safety: printable() is pure; a TerminalStreambuf belongs to one stream.
#pragma once

#include <cstdio>
#include <streambuf>
#include <string>
#include <string_view>

namespace gpumemtrace::util {

namespace terminal_detail {

// The escape for control byte `c` (C0 or DEL), appended to `out`.
inline void append_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: {
      char text[8];
      std::snprintf(text, sizeof text, "\\x%02x", c);
      out += text;
    }
  }
}

inline bool is_c0_or_del(unsigned char c) { return c < 0x20 || c == 0x7f; }
// The second byte of a C1 control in UTF-8 (after 0xC2).
inline bool is_c1_tail(unsigned char c) { return c >= 0x80 && c <= 0x9f; }

}  // namespace terminal_detail

// `text` with every control character escaped (newlines too): one line, safe to print.
inline std::string printable(std::string_view text) {
  using namespace terminal_detail;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_c0_or_del(c)) {
      append_escape(out, c);
    } else if (c == 0xc2 && i + 1 < text.size() && is_c1_tail(static_cast<unsigned char>(text[i + 1]))) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned char>(text[++i]));
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A stream buffer that passes text on to `target` with every control character but '\n' escaped
// (as printable() does). Install with stream.rdbuf(&buf); it flushes what it holds on sync() and when
// destroyed.
class TerminalStreambuf : public std::streambuf {
 public:
  explicit TerminalStreambuf(std::streambuf* target) : target_(target) {}
  ~TerminalStreambuf() override { sync(); }
  TerminalStreambuf(const TerminalStreambuf&) = delete;
  TerminalStreambuf& operator=(const TerminalStreambuf&) = delete;

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    put(static_cast<unsigned char>(traits_type::to_char_type(ch)));
    if (pending_.size() >= 4096 && flush_pending() != 0) return traits_type::eof();
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) put(static_cast<unsigned char>(s[i]));
    if (pending_.size() >= 4096 && flush_pending() != 0) return 0;
    return n;
  }
  int sync() override {
    if (lead_c2_) {  // a 0xC2 at the very end: no C1 control follows
      lead_c2_ = false;
      pending_ += '\xc2';
    }
    if (flush_pending() != 0) return -1;
    return target_->pubsync();
  }

 private:
  void put(unsigned char c) {
    using namespace terminal_detail;
    if (lead_c2_) {  // the byte after a 0xC2 lead: a C1 control is escaped, anything else passes
      lead_c2_ = false;
      if (is_c1_tail(c)) {
        char escape[8];
        std::snprintf(escape, sizeof escape, "\\u%04x", c);
        pending_ += escape;
        return;
      }
      pending_ += '\xc2';
    }
    if (c == 0xc2) {
      lead_c2_ = true;
    } else if (c != '\n' && is_c0_or_del(c)) {
      append_escape(pending_, c);
    } else {
      pending_ += static_cast<char>(c);
    }
  }
  int flush_pending() {
    if (pending_.empty()) return 0;
    const auto n = static_cast<std::streamsize>(pending_.size());
    const bool ok = target_->sputn(pending_.data(), n) == n;
    pending_.clear();
    return ok ? 0 : -1;
  }

  std::streambuf* target_;
  std::string pending_;
  bool lead_c2_ = false;  // a 0xC2 byte is held until the next one says whether it began a C1 control
};

}  // namespace gpumemtrace::util
