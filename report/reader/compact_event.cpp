// report/reader/compact_event.cpp — see compact_event.h.
#include "report/reader/compact_event.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

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
  // As parse_hex: "0x" and 1 to 16 hex digits.
  bool read_hex(uint64_t* out) {
    if (end_ - p_ < 5 || p_[0] != '"' || p_[1] != '0' || (p_[2] != 'x' && p_[2] != 'X')) return false;
    const char* start = p_ + 3;
    // 16 bytes read at once (the padding makes them readable); the digits are those before the first
    // byte that is not one, at most 16, none past the line.
    const uint64_t first = load8(start), second = load8(start + 8);
    size_t n = hex_digits(first);
    if (n == 8) n += hex_digits(second);
    n = std::min<size_t>(n, static_cast<size_t>(end_ - start));
    p_ = start + n;
    if (n == 0 || !literal('"')) return false;
    const size_t high = std::min<size_t>(n, 8);
    uint64_t value = hex_value(first, high);
    if (n > 8) value = value << (4 * (n - 8)) | hex_value(second, n - 8);
    *out = value;
    return true;
  }

  // Eight bytes as one little-endian word: the first byte lowest.
  static uint64_t load8(const char* p) {
    uint64_t word;
    std::memcpy(&word, p, sizeof word);
    return word;
  }
  static constexpr uint64_t kOnes = 0x0101010101010101ull;
  static constexpr uint64_t kHighBits = 0x8080808080808080ull;
  // The high bit of each byte of `word` that lies in [lo, hi] (lo, hi < 0x80): its low 7 bits compared
  // without a carry between bytes, a byte with its high bit set never in range.
  static constexpr uint64_t in_range(uint64_t word, uint8_t lo, uint8_t hi) {
    const uint64_t low7 = word & ~kHighBits;
    const uint64_t at_least_lo = (low7 + kOnes * (0x80 - lo)) & kHighBits;
    const uint64_t above_hi = (low7 + kOnes * (0x7f - hi)) & kHighBits;
    return at_least_lo & ~above_hi & ~word & kHighBits;
  }
  // How many of the word's bytes, from the first, are hex digits (0-9, a-f, A-F): 0 to 8.
  static size_t hex_digits(uint64_t word) {
    const uint64_t digit = in_range(word, '0', '9') | in_range(word | kOnes * 0x20, 'a', 'f');
    const uint64_t other = ~digit & kHighBits;
    return other ? static_cast<size_t>(__builtin_ctzll(other)) / 8 : 8;
  }
  // The value of the first n (1 to 8) bytes of `word`, all hex digits, the first the most significant.
  static uint64_t hex_value(uint64_t word, size_t n) {
    // Each digit's value in its byte: the low nibble, plus 9 for a letter (bit 6 set: 'a' and 'A').
    uint64_t v = (word & kOnes * 0x0f) + 9 * ((word >> 6) & kOnes);
    v = __builtin_bswap64(v) >> (8 * (8 - n));  // the last digit in the lowest byte
    v = (v | v >> 4) & 0x00ff00ff00ff00ffull;  // two digits per byte pair, then four, then eight
    v = (v | v >> 8) & 0x0000ffff0000ffffull;
    return (v | v >> 16) & 0xffffffffull;
  }

  const char* p_;
  const char* end_;
};

}  // namespace

bool scan_compact_event(std::string_view line, Fields& f) { return CompactEventScanner(line).scan(f); }

}  // namespace gpumemtrace::report::reader
