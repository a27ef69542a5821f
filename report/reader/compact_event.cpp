// report/reader/compact_event.cpp — see compact_event.h.
#include "report/reader/compact_event.h"

#include <algorithm>
#include <array>
#include <cstddef>

namespace gpumemtrace::report::reader {

namespace {

class CompactEventScanner {
 public:
  explicit CompactEventScanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  // True when the whole line was read into `f` (its event fields cleared first).
  bool scan(Fields& f) {
    using B = Fields::Bit;
    f.clear_event_fields();
    if (!literal('{')) return false;
    do {
      std::string_view key;
      if (!read_key(&key)) return false;
      std::string_view text;
      bool ok = false;
      switch (key.size()) {
        case 1:
          switch (key[0]) {
            case 'e': ok = read_unsigned(kMaxId, &f.site); f.present |= B::kSite; break;
            case 't': ok = read_signed(UINT64_MAX, &f.t, &f.t_negative); break;
            case 'q': ok = read_unsigned(UINT64_MAX, &f.seq_jump); f.present |= B::kSeqJump; break;
            case 'a': ok = read_hex(&f.short_addr); break;
            case 's': ok = read_unsigned(kMaxSize, &f.short_size); break;
            case 'r': {
              uint64_t bits = 0;
              bool negative = false;
              ok = read_signed(INT64_MAX, &bits, &negative);
              f.short_result = static_cast<int64_t>(bits);
              break;
            }
            default: return false;
          }
          break;
        case 4:
          if (key == fmt::kFieldPool) ok = read_string(&f.pool);
          else if (key == fmt::kFieldFree) ok = read_unsigned(kMaxSize, &f.free), f.present |= B::kFree;
          else return false;
          break;
        case 5:
          if (key == fmt::kFieldLabel) ok = read_string(&f.label);
          else if (key == fmt::kFieldTotal) ok = read_unsigned(kMaxSize, &f.total), f.present |= B::kTotal;
          else if (key == fmt::kFieldRange) ok = read_unsigned(kMaxSize, &f.range);
          else return false;
          break;
        case 6:
          if (key == fmt::kFieldHandle) ok = read_hex(&f.handle), f.present |= B::kHandle;
          else if (key == fmt::kFieldStream) ok = read_hex(&f.stream);
          else return false;
          break;
        case 7:
          if (key == fmt::kFieldSegment) ok = read_hex(&f.segment), f.present |= B::kSegment;
          else return false;
          break;
        default:
          return false;
      }
      if (!ok) return false;
    } while (literal(','));
    return literal('}') && p_ == end_;
  }

 private:
  // The loops below advance a local cursor and store p_ once: a char read may alias p_, so a loop
  // on p_ itself stores it on every byte.
  bool literal(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  bool read_key(std::string_view* key) {
    if (!literal('"')) return false;
    const char* start = p_;
    const char* p = p_;
    while (p != end_ && ((*p >= 'a' && *p <= 'z') || *p == '_')) ++p;
    p_ = p;
    *key = std::string_view(start, static_cast<size_t>(p - start));
    return !key->empty() && literal('"') && literal(':');
  }
  // JSON integer digits (no leading zero unless alone), at most 19: no overflow. The value must end
  // the member (',' or '}'): a fraction or exponent is not taken.
  bool read_digits(uint64_t* out) {
    const char* start = p_;
    const char* p = p_;
    const char* limit = p + std::min<ptrdiff_t>(19, end_ - p);
    uint64_t value = 0;
    while (p != limit && static_cast<unsigned char>(*p - '0') < 10) value = value * 10 + static_cast<uint64_t>(*p++ - '0');
    p_ = p;
    const size_t n = static_cast<size_t>(p - start);
    if (n == 0 || (n > 1 && *start == '0') || p == end_ || (*p != ',' && *p != '}')) return false;
    *out = value;
    return true;
  }
  bool read_unsigned(uint64_t max, uint64_t* out) {
    uint64_t value = 0;
    if (!read_digits(&value) || value > max) return false;
    *out = value;
    return true;
  }
  // As parse_field's "t" and "r": a negative value (down to INT64_MIN) as its two's complement,
  // flagged; a positive one up to `positive_max`.
  bool read_signed(uint64_t positive_max, uint64_t* out, bool* negative) {
    *negative = literal('-');
    uint64_t magnitude = 0;
    if (!read_digits(&magnitude)) return false;
    if (magnitude > (*negative ? uint64_t{1} << 63 : positive_max)) return false;
    *out = *negative ? ~magnitude + 1 : magnitude;
    return true;
  }
  // A string past the length limit goes through simdjson too, which cuts it (json_checks.h).
  bool read_string(std::string_view* out) {
    if (!literal('"')) return false;
    const char* start = p_;
    const char* p = p_;
    while (p != end_ && *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ++p;
    p_ = p;
    *out = std::string_view(start, static_cast<size_t>(p - start));
    return out->size() <= fmt::kMaxStringBytes && literal('"');
  }
  // As parse_hex: "0x" and 1 to 16 hex digits, read in one pass.
  bool read_hex(uint64_t* out) {
    if (end_ - p_ < 5 || p_[0] != '"' || p_[1] != '0' || (p_[2] != 'x' && p_[2] != 'X')) return false;
    const char* start = p_ + 3;
    const char* p = start;
    const char* limit = p + std::min<ptrdiff_t>(16, end_ - p);
    uint64_t value = 0;
    int8_t digit;
    while (p != limit && (digit = kHexDigit[static_cast<unsigned char>(*p)]) >= 0) {
      value = value << 4 | static_cast<uint64_t>(digit);
      ++p;
    }
    p_ = p;
    if (p == start || !literal('"')) return false;
    *out = value;
    return true;
  }

  // The value of a hex digit character, -1 for any other byte.
  static constexpr std::array<int8_t, 256> kHexDigit = [] {
    std::array<int8_t, 256> table{};
    for (int c = 0; c < 256; ++c) {
      table[c] = static_cast<int8_t>((c >= '0' && c <= '9')   ? c - '0'
                                     : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                     : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                                              : -1);
    }
    return table;
  }();

  const char* p_;
  const char* end_;
};

}  // namespace

bool scan_compact_event(std::string_view line, Fields& f) { return CompactEventScanner(line).scan(f); }

bool scan_common_event(std::string_view line, Fields& scratch, CommonEventLine& out) {
  if (!scan_compact_event(line, scratch)) return false;
  const Fields& f = scratch;
  // Every other field the scanner sets still as clear_event_fields() left it: absent.
  if ((f.present & ~uint32_t{Fields::kSegment}) != Fields::kSite || f.seq_jump || f.short_result || f.handle ||
      f.stream || f.free || f.total || f.range || f.label.data())
    return false;
  out.site = f.site;
  out.segment = f.segment;
  out.pool = f.pool;
  out.t = f.t;
  out.t_negative = f.t_negative;
  out.addr = f.short_addr;
  out.size = f.short_size;
  out.present = f.present;
  return true;
}

void set_common_event(const CommonEventLine& line, Fields& f) {
  f.clear_event_fields();
  f.present = line.present;
  f.site = line.site;
  f.t = line.t;
  f.t_negative = line.t_negative;
  f.short_addr = line.addr;
  f.short_size = line.size;
  f.segment = line.segment;
  f.pool = line.pool;
}

}  // namespace gpumemtrace::report::reader
