// report/reader/trace_reader.cpp — parses and validates each trace line and hands typed records on.
#include "report/reader/trace_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <unordered_set>

#include "report/reader/event_merger.h"
#include "report/reader/json_checks.h"
#include "report/reader/line_reader.h"
#include "report/reader/offline_symbolizer.h"

namespace gpumemtrace::report {
namespace fmt = gpumemtrace::format;
namespace od = simdjson::ondemand;

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "lines must carry simdjson's padding");

namespace {

// The largest values accepted (inclusive, as get_u64's `max`).
// Sizes and counters are written as integers below 2^53 (format.h); anything larger is corrupt.
constexpr uint64_t kMaxSize = fmt::kMaxInteger;
// Ids are "small positive integers" held as uint32_t; this bound keeps a corrupt id from looking
// valid (or from wrapping to another id).
constexpr uint64_t kMaxId = UINT32_MAX;

using LineError = JsonLineError;  // thrown inside one line's parse; read_trace adds file and line

[[noreturn]] void fail(std::string message) { throw LineError{std::move(message)}; }

void check(simdjson::error_code error, std::string_view field, const char* expected) {
  if (error) fail("field \"" + std::string(field) + "\": expected " + expected);
}

uint64_t parse_hex(std::string_view text, std::string_view field) {
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) {
    fail("field \"" + std::string(field) + "\": expected a \"0x...\" hex string");
  }
  uint64_t value = 0;
  for (char c : text.substr(2)) {
    int digit = (c >= '0' && c <= '9') ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (digit < 0) fail("field \"" + std::string(field) + "\": bad hex digit");
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return value;
}

// Every field of every record type, gathered in one pass over the object (simdjson's on-demand
// API is fastest when each value is visited once, in document order).
struct Fields {
  enum Bit : uint32_t {
    kType = 1u << 0, kVersion = 1u << 1, kId = 1u << 2, kSeq = 1u << 3, kOp = 1u << 4,
    kSize = 1u << 5, kDevice = 1u << 6, kFree = 1u << 7, kTotal = 1u << 8, kFrames = 1u << 9,
    kSegment = 1u << 10, kHandle = 1u << 11, kCount = 1u << 12, kModule = 1u << 13,
    kFormat = 1u << 14, kFunction = 1u << 15, kSite = 1u << 16, kSeqJump = 1u << 17,
    kSizeExact = 1u << 18, kDeviceExact = 1u << 19, kFreeExact = 1u << 20, kTotalExact = 1u << 21,
  };
  uint32_t present = 0;
  bool has(Bit bit) const { return (present & bit) != 0; }

  std::string_view type, format, op, kind, pool, label, api, function, file, path, exe, host,
      library, backend, name, lang, build_id, rank_from, end, source, conf, env_alloc_conf, env_cuda_alloc_conf,
      env_hip_alloc_conf;
  double fraction = 0.0;
  bool has_fraction = false;
  uint64_t version = 0, id = 0, seq = 0, t = 0, tid = 0, size = 0, stack = 0, module = 0, line = 0,
           free = 0, total = 0, count = 0, dropped_total = 0, events = 0, end_time = 0,
           start_time = 0, clock_start = 0, addr = 0, segment = 0, handle = 0, stream = 0, ip = 0, offset = 0, range = 0,
           max_bytes = 0, not_written = 0;
  int64_t device = -1, result = 0, pid = -1, ppid = -1, rank = -1, local_rank = -1, world_size = -1,
          exit_status = -1, signal = 0;
  bool delayed = false;
  bool initial = false;
  // "t" read as a signed number (version 2, where an event line's "t" is a delta): t holds its
  // two's complement.
  bool t_negative = false;
  // Version 2 event lines: the site, and the short-keyed fields (kept apart from the long-named ones,
  // which an event line does not use).
  uint64_t site = 0, seq_jump = 0, short_addr = 0, short_size = 0;
  int64_t short_result = 0;
  // Values the recorder clamped (format.h, kFieldSizeExact...): what the program passed.
  uint64_t size_exact = 0, free_exact = 0, total_exact = 0;
  int64_t device_exact = 0;
  bool size_out_of_range = false;  // size_exact is kOutOfRange: above 2^64 - 1
  std::vector<uint32_t> frames;
  std::vector<SymbolTable::InlinedCall> inlined;
  std::vector<std::string> cmdline;
  // Strings of this line and of the whole trace cut at kMaxStringBytes (json_checks.h).
  StringLimit strings;

  void clear() {
    // The vectors keep their capacity: no allocation per line in the steady state.
    frames.clear();
    inlined.clear();
    cmdline.clear();
    strings.next_line();
    std::vector<uint32_t> f = std::move(frames);
    std::vector<SymbolTable::InlinedCall> i = std::move(inlined);
    std::vector<std::string> c = std::move(cmdline);
    StringLimit s = std::move(strings);
    *this = Fields{};
    frames = std::move(f);
    inlined = std::move(i);
    cmdline = std::move(c);
    strings = std::move(s);
  }
  // clear() for a version 2 event line read by CompactEventScanner: only what such a line sets and
  // the dispatcher then reads (the presence bits, the short-keyed and the optional event fields).
  void clear_event_fields() {
    present = 0;
    site = seq_jump = short_addr = short_size = t = segment = handle = stream = free = total = range = 0;
    short_result = 0;
    t_negative = initial = false;
    pool = label = std::string_view();
    strings.next_line();
  }
};

// The line being parsed (parse_line sets it; one reader per thread): where get_str puts the strings
// it cuts, and how many values the field parsers have read, so that a field none of them read (an
// unknown one) is still checked to be valid JSON.
struct LineContext {
  StringLimit* strings = nullptr;
  uint64_t values_read = 0;
};
thread_local LineContext t_line;

// `text` within the string limit (json_checks.h).
std::string_view limited(std::string_view text) {
  return t_line.strings ? t_line.strings->cut(text) : text;
}

// The key, unescaped: the recorder writes keys without escapes, read in place; a key with one
// ("\u0073" is "s") is unescaped like any JSON reader does, and an invalid escape is an error.
std::string_view key_of(od::field& field) {
  // Keys are short: a plain scan beats a memchr call. simdjson validated the document's strings, so
  // the closing quote is there.
  const char* raw = field.key().raw();
  size_t n = 0;
  while (raw[n] != '"' && raw[n] != '\\') ++n;
  if (raw[n] == '"') return std::string_view(raw, n);
  std::string_view key;
  if (field.unescaped_key().get(key)) fail("not valid JSON (a key with an invalid escape)");
  return key;
}

uint64_t get_u64(od::value& value, std::string_view key, uint64_t max = kMaxSize) {
  ++t_line.values_read;
  uint64_t out = 0;
  // Fast path: plain digits read in place (at most 19: no overflow), ended by a JSON delimiter.
  // Anything else (a sign, a fraction, 20 digits, a non-number) goes through simdjson, which gives
  // the same value or the error.
  const char* p = value.raw_json_token().data();
  size_t n = 0;
  while (n < 19 && static_cast<unsigned char>(p[n] - '0') < 10) out = out * 10 + static_cast<uint64_t>(p[n++] - '0');
  char next = p[n];
  bool plain = n > 0 && (p[0] != '0' || n == 1) &&
               (next == ',' || next == '}' || next == ']' || next == ' ' || next == '\n' || next == '\r' || next == '\t');
  if (!plain) {
    out = 0;
    check(value.get_uint64().get(out), key, "an unsigned integer");
  }
  if (out > max) fail("field \"" + std::string(key) + "\": value out of range");
  return out;
}

int64_t get_i64(od::value& value, std::string_view key) {
  ++t_line.values_read;
  int64_t out = 0;
  check(value.get_int64().get(out), key, "an integer");
  return out;
}

bool get_bool(od::value& value, std::string_view key) {
  ++t_line.values_read;
  bool out = false;
  check(value.get_bool().get(out), key, "true or false");
  return out;
}

std::string_view get_str(od::value& value, std::string_view key) {
  ++t_line.values_read;
  std::string_view out;
  check(value.get_string().get(out), key, "a string");
  return limited(out);
}

// A string without escapes, read in place (no copy into simdjson's string buffer); one with
// escapes goes through get_str. For the hot enumerated fields of event lines (type, op, kind, api,
// pool). The view points into the line, valid as long as get_str's would be.
std::string_view get_plain_str(od::value& value, std::string_view key) {
  std::string_view raw = value.raw_json_token();
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r' || raw.back() == '\n')) {
    raw.remove_suffix(1);
  }
  if (raw.size() < 2 || raw.front() != '"' || raw.back() != '"') return get_str(value, key);  // the type error
  raw = raw.substr(1, raw.size() - 2);
  if (raw.find('\\') != std::string_view::npos) return get_str(value, key);
  ++t_line.values_read;
  return limited(raw);
}

void parse_inlined(od::value& value, Fields& f) {
  ++t_line.values_read;
  f.inlined.clear();  // a repeated key: the last one counts, as in any JSON reader
  od::array calls;
  check(value.get_array().get(calls), "inlined", "a list");
  for (auto element : calls) {
    if (f.inlined.size() >= static_cast<size_t>(fmt::kMaxInlinedLevels)) {
      fail("field \"inlined\": more than " + std::to_string(fmt::kMaxInlinedLevels) +
           " inlined calls in one frame (the reader's limit, docs/security.md)");
    }
    od::object call;
    check(element.get_object().get(call), "inlined", "a list of objects");
    SymbolTable::InlinedCall parsed;
    for (auto field_result : call) {
      od::field field;
      check(std::move(field_result).get(field), "inlined", "a list of objects");
      std::string_view key = key_of(field);
      od::value v = field.value();
      if (key == fmt::kFieldFunction) parsed.function = std::string(get_str(v, key));
      else if (key == fmt::kFieldFile) parsed.file = std::string(get_str(v, key));
      else if (key == fmt::kFieldLine) parsed.line = static_cast<uint32_t>(get_u64(v, key, UINT32_MAX));
      else validate_value(v);
    }
    f.inlined.push_back(std::move(parsed));
  }
}

void parse_frames(od::value& v, std::string_view key, Fields& f) {
  ++t_line.values_read;
  f.frames.clear();  // a repeated key: the last one counts
  od::array ids;
  check(v.get_array().get(ids), key, "a list of frame ids");
  for (auto element : ids) {
    if (f.frames.size() >= static_cast<size_t>(fmt::kMaxStackFrames)) {
      fail("field \"frames\": more than " + std::to_string(fmt::kMaxStackFrames) +
           " frames in one stack (the reader's limit, docs/security.md)");
    }
    uint64_t id = 0;
    check(element.get_uint64().get(id), key, "a list of frame ids");
    if (id == 0 || id > kMaxId) fail("field \"frames\": frame id out of range");
    f.frames.push_back(static_cast<uint32_t>(id));
  }
}

void parse_cmdline(od::value& v, std::string_view key, Fields& f) {
  ++t_line.values_read;
  f.cmdline.clear();  // a repeated key: the last one counts
  od::array args;
  check(v.get_array().get(args), key, "a list of strings");
  for (auto element : args) {
    std::string_view arg;
    check(element.get_string().get(arg), key, "a list of strings");
    f.cmdline.emplace_back(limited(arg));
  }
}

// Dispatch on the key's length, then its first character, then one full comparison: two branches
// and one short compare per field instead of a chain of up to 40 comparisons (unknown fields, such
// as "stream" on every event line, used to walk the whole chain).
// `version`: the trace's (0 while the header is read). Version 2 adds the short keys of event lines.
void parse_field(std::string_view key, od::value& v, Fields& f, int version) {
  using B = Fields::Bit;
  auto is = [&key](const char* name) { return key == name; };
  switch (key.size()) {
    case 1:
      if (version < fmt::kVersion2) {
        if (is(fmt::kFieldTime)) f.t = get_u64(v, key, UINT64_MAX);
        return;
      }
      switch (key[0]) {
        case 't':  // an event line's delta, or another record's time: signed here, checked by the record
          if (v.raw_json_token().substr(0, 1) == "-") {
            f.t = static_cast<uint64_t>(get_i64(v, key));
            f.t_negative = true;
          } else {
            f.t = get_u64(v, key, UINT64_MAX);
            f.t_negative = false;  // a repeated "t": the last one counts
          }
          return;
        case 'e': f.site = get_u64(v, key, kMaxId); f.present |= B::kSite; return;
        case 'q': f.seq_jump = get_u64(v, key, UINT64_MAX); f.present |= B::kSeqJump; return;
        case 'a': f.short_addr = parse_hex(get_plain_str(v, key), key); return;
        case 's': f.short_size = get_u64(v, key); return;
        case 'r': f.short_result = get_i64(v, key); return;
        default: return;
      }
    case 2:
      if (key[0] == 'o') {
        if (is(fmt::kFieldOp)) { f.op = get_plain_str(v, key); f.present |= B::kOp; }
      } else if (is(fmt::kFieldId)) {
        f.id = get_u64(v, key, kMaxId); f.present |= B::kId;
      } else if (is(fmt::kFieldIp)) {
        f.ip = parse_hex(get_plain_str(v, key), key);
      }
      return;
    case 3:
      switch (key[0]) {
        case 's': if (is(fmt::kFieldSeq)) { f.seq = get_u64(v, key, UINT64_MAX); f.present |= B::kSeq; } return;
        case 't': if (is(fmt::kFieldTid)) f.tid = get_u64(v, key, UINT64_MAX); return;
        case 'a': if (is(fmt::kFieldApi)) f.api = get_plain_str(v, key); return;
        case 'p': if (is(fmt::kFieldPid)) f.pid = get_i64(v, key); return;
        case 'e':
          if (is(fmt::kFieldExe)) f.exe = get_str(v, key);
          else if (is(fmt::kFieldEnd)) f.end = get_plain_str(v, key);
          return;
        default: return;
      }
    case 4:
      switch (key[0]) {
        case 'k': if (is(fmt::kFieldKind)) f.kind = get_plain_str(v, key); return;
        case 'a': if (is(fmt::kFieldAddr)) f.addr = parse_hex(get_plain_str(v, key), key); return;
        case 's': if (is(fmt::kFieldSize)) { f.size = get_u64(v, key); f.present |= B::kSize; } return;
        case 't': if (is(fmt::kFieldType)) { f.type = get_plain_str(v, key); f.present |= B::kType; } return;
        case 'p':
          if (is(fmt::kFieldPool)) f.pool = get_str(v, key);
          else if (is(fmt::kFieldPath)) f.path = get_str(v, key);
          else if (is(fmt::kFieldPpid)) f.ppid = get_i64(v, key);
          return;
        case 'f':
          if (is(fmt::kFieldFree)) { f.free = get_u64(v, key); f.present |= B::kFree; }
          else if (is(fmt::kFieldFile)) f.file = get_str(v, key);
          return;
        case 'l':
          if (is(fmt::kFieldLine)) f.line = get_u64(v, key, UINT32_MAX);
          else if (is(fmt::kFieldLang)) f.lang = get_str(v, key);
          return;
        case 'n': if (is(fmt::kFieldName)) f.name = get_str(v, key); return;
        case 'h': if (is(fmt::kFieldHost)) f.host = get_str(v, key); return;
        case 'r': if (is(fmt::kFieldRank)) f.rank = get_i64(v, key); return;
        case 'c': if (is(fmt::kFieldConf)) f.conf = get_str(v, key); return;
        default: return;
      }
    case 5:
      switch (key[0]) {
        case 's': if (is(fmt::kFieldStack)) f.stack = get_u64(v, key, kMaxId); return;
        case 'l': if (is(fmt::kFieldLabel)) f.label = get_str(v, key); return;
        case 't': if (is(fmt::kFieldTotal)) { f.total = get_u64(v, key); f.present |= B::kTotal; } return;
        case 'c': if (is(fmt::kFieldCount)) { f.count = get_u64(v, key); f.present |= B::kCount; } return;
        case 'r': if (is(fmt::kFieldRange)) f.range = get_u64(v, key); return;
        default: return;
      }
    case 6:
      switch (key[0]) {
        case 'd':
          if (is(fmt::kFieldDevice)) {
            f.device = get_i64(v, key);
            if (f.device < -1 || f.device > INT32_MAX) fail("field \"device\": value out of range");
            f.present |= B::kDevice;
          }
          return;
        case 'r': if (is(fmt::kFieldResult)) f.result = get_i64(v, key); return;
        case 'h': if (is(fmt::kFieldHandle)) { f.handle = parse_hex(get_str(v, key), key); f.present |= B::kHandle; } return;
        case 's':
          if (is(fmt::kFieldStream)) f.stream = parse_hex(get_str(v, key), key);
          else if (is(fmt::kFieldSource)) f.source = get_str(v, key);
          else if (is(fmt::kFieldSignal)) f.signal = get_u64(v, key, 1023);
          return;
        case 'm': if (is(fmt::kFieldModule)) { f.module = get_u64(v, key, kMaxId); f.present |= B::kModule; } return;
        case 'f':
          if (is(fmt::kFieldFrames)) { parse_frames(v, key, f); f.present |= B::kFrames; }
          else if (is(fmt::kFieldFormat)) { f.format = get_str(v, key); f.present |= B::kFormat; }
          return;
        case 'e': if (is(fmt::kFieldEvents)) f.events = get_u64(v, key); return;
        case 'o': if (is(fmt::kFieldOffset)) f.offset = parse_hex(get_plain_str(v, key), key); return;
        default: return;
      }
    case 7:
      switch (key[0]) {
        case 's': if (is(fmt::kFieldSegment)) { f.segment = parse_hex(get_str(v, key), key); f.present |= B::kSegment; } return;
        case 'i':
          if (is(fmt::kFieldInlined)) parse_inlined(v, f);
          else if (is(fmt::kFieldInitial)) f.initial = get_bool(v, key);
          return;
        case 'v': if (is(fmt::kFieldVersion)) { f.version = get_u64(v, key, UINT64_MAX); f.present |= B::kVersion; } return;
        case 'l': if (is(fmt::kFieldLibrary)) f.library = get_str(v, key); return;
        case 'b': if (is(fmt::kFieldBackend)) f.backend = get_str(v, key); return;
        case 'c': if (is(fmt::kFieldCmdline)) parse_cmdline(v, key, f); return;
        case 'd': if (is(fmt::kFieldDelayed)) f.delayed = get_bool(v, key); return;
        default: return;
      }
    case 8:
      if (is(fmt::kFieldFunction)) { f.function = get_str(v, key); f.present |= B::kFunction; }
      else if (is(fmt::kFieldBuildId)) f.build_id = get_str(v, key);
      else if (is(fmt::kFieldEndTime)) f.end_time = get_u64(v, key, UINT64_MAX);
      else if (is(fmt::kFieldFraction)) {
        check(v.get_double().get(f.fraction), key, "a number");
        f.has_fraction = true;
      }
      return;
    case 9:
      if (is(fmt::kFieldMaxBytes)) f.max_bytes = get_u64(v, key, UINT64_MAX);
      else if (is(fmt::kFieldRankFrom)) f.rank_from = get_str(v, key);
      return;
    case 10:
      if (is(fmt::kFieldLocalRank)) {
        f.local_rank = get_i64(v, key);
      } else if (is(fmt::kFieldWorldSize)) {
        f.world_size = get_i64(v, key);
      } else if (is(fmt::kFieldSizeExact)) {
        f.size_exact = parse_exact_size(get_str(v, key), key, &f.size_out_of_range);
        f.present |= B::kSizeExact;
      } else if (is(fmt::kFieldFreeExact)) {
        f.free_exact = parse_exact_size(get_str(v, key), key, nullptr);
        f.present |= B::kFreeExact;
      }
      return;
    case 11:
      if (is(fmt::kFieldNotWritten)) f.not_written = get_u64(v, key, UINT64_MAX);
      else if (is(fmt::kFieldExitStatus)) f.exit_status = get_u64(v, key, 255);
      else if (is(fmt::kFieldTotalExact)) { f.total_exact = parse_exact_size(get_str(v, key), key, nullptr); f.present |= B::kTotalExact; }
      return;
    case 12:
      if (is(fmt::kFieldDeviceExact)) { f.device_exact = parse_exact_device(get_str(v, key)); f.present |= B::kDeviceExact; }
      return;
    case 13:
      if (is(fmt::kFieldDroppedTotal)) f.dropped_total = get_u64(v, key);
      else if (is(fmt::kFieldStartTime)) f.start_time = get_u64(v, key, UINT64_MAX);
      return;
    case 14:
      if (is(fmt::kFieldClockStart)) f.clock_start = get_u64(v, key, UINT64_MAX);
      return;
    case 18:
      if (is(fmt::kFieldEnvAllocConf)) f.env_alloc_conf = get_str(v, key);
      return;
    case 22:
      if (is(fmt::kFieldEnvHipAllocConf)) f.env_hip_alloc_conf = get_str(v, key);
      return;
    case 23:
      if (is(fmt::kFieldEnvCudaAllocConf)) f.env_cuda_alloc_conf = get_str(v, key);
      return;
    default:
      return;  // Unknown fields are ignored (format rule): newer writers may add optional ones.
  }
}

// Reads one line into `f`. Throws LineError when it is not a JSON object or a field has the
// wrong type.
void parse_line(od::parser& parser, const Line& line, Fields& f, int version) {
  f.clear();
  od::document doc;
  if (parser.iterate(line.text.data(), line.text.size(), line.text.size() + kLinePadding).get(doc)) {
    fail("not valid JSON");
  }
  od::object object;
  if (doc.get_object().get(object)) fail("not a JSON object");
  t_line.strings = &f.strings;
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field)) fail("not valid JSON");
    std::string_view key = key_of(field);
    od::value value = field.value();
    const uint64_t read_before = t_line.values_read;
    f.strings.begin_field(key);
    parse_field(key, value, f, version);
    if (t_line.values_read == read_before) validate_value(value);  // a field not read: valid JSON still
  }
  // After the object, only the end of the line may remain.
  if (!doc.current_location().error()) fail("not valid JSON (characters after the object)");
  f.strings.end_line();
}

// Version 2 event lines without simdjson. Nearly every line of a version 2 trace is an event line in
// the one shape the recorder writes: {"e":4,"t":3365,"a":"0x700000000000","s":256}. Such a line is
// read here directly: for lines this short simdjson's per-document set-up costs more than the
// parse. Accepted: no whitespace; keys of a-z and _; numbers as JSON writes integers (t and r may be
// negative; at most 19 digits); strings of printable ASCII without escapes; only the keys below,
// each read exactly as parse_field reads it for version 2 (same limits). Anything else — whitespace,
// an escape, non-ASCII text, another key, a value out of range — makes scan() return false, and the
// line goes through simdjson, which validates it and names what is wrong.
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
  bool literal(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  bool read_key(std::string_view* key) {
    if (!literal('"')) return false;
    const char* start = p_;
    while (p_ != end_ && ((*p_ >= 'a' && *p_ <= 'z') || *p_ == '_')) ++p_;
    *key = std::string_view(start, static_cast<size_t>(p_ - start));
    return !key->empty() && literal('"') && literal(':');
  }
  // JSON integer digits (no leading zero unless alone), at most 19: no overflow. The value must end
  // the member (',' or '}'): a fraction or exponent is not taken.
  bool read_digits(uint64_t* out) {
    const char* start = p_;
    uint64_t value = 0;
    while (p_ != end_ && p_ - start < 19 && static_cast<unsigned char>(*p_ - '0') < 10) value = value * 10 + static_cast<uint64_t>(*p_++ - '0');
    const size_t n = static_cast<size_t>(p_ - start);
    if (n == 0 || (n > 1 && *start == '0') || p_ == end_ || (*p_ != ',' && *p_ != '}')) return false;
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
    while (p_ != end_ && *p_ >= 0x20 && *p_ < 0x7f && *p_ != '"' && *p_ != '\\') ++p_;
    *out = std::string_view(start, static_cast<size_t>(p_ - start));
    return out->size() <= fmt::kMaxStringBytes && literal('"');
  }
  // As parse_hex: "0x" and 1 to 16 hex digits, read in one pass.
  bool read_hex(uint64_t* out) {
    if (end_ - p_ < 5 || p_[0] != '"' || p_[1] != '0' || (p_[2] != 'x' && p_[2] != 'X')) return false;
    p_ += 3;
    const char* start = p_;
    uint64_t value = 0;
    int8_t digit;
    while (p_ != end_ && p_ - start < 16 && (digit = kHexDigit[static_cast<unsigned char>(*p_)]) >= 0) {
      value = value << 4 | static_cast<uint64_t>(digit);
      ++p_;
    }
    if (p_ == start || !literal('"')) return false;
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

bool blank(std::string_view text) {
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

class Dispatcher {
 public:
  Dispatcher(SymbolTable& symbols, TraceHandler& handler, ReadResult& result)
      : symbols_(symbols), handler_(handler), result_(result), merger_(handler) {}

  // End of the trace (or of what could be read): the events still held for merging go out.
  void finish() {
    merger_.finish();
    for (std::string& warning : offline_.warnings()) result_.warnings.push_back(std::move(warning));
    if (merger_.late()) {
      result_.warnings.push_back(std::to_string(merger_.late()) +
                                 " delayed events came after a sync that covered their time: merged at the "
                                 "next sync (their order is approximate)");
    }
    if (merger_.forced()) {
      result_.warnings.push_back(std::to_string(merger_.forced()) +
                                 " events handed on before their sync (more than " +
                                 std::to_string(EventMerger::kDefaultMaxBuffered) + " events or " +
                                 std::to_string(EventMerger::kMaxHeldBytes >> 20) +
                                 " MiB between two syncs): the order around them is approximate");
    }
    if (!clamped_first_.empty()) {
      result_.warnings.push_back(std::to_string(clamped_) + (clamped_ == 1 ? " value" : " values") +
                                 " the trace format cannot hold, clamped by the recorder (the first: " + clamped_first_ +
                                 "); failed requests are reported with their exact size");
    }
  }

  // True when the last line dispatched was a record this reader ignores (an unknown type).
  bool ignored() const { return ignored_; }

  int version() const { return version_; }

  void dispatch(const Fields& f, uint64_t line_number) {
    ignored_ = false;
    line_ = line_number;
    using B = Fields::Bit;
    // Version 2 event lines have no "type": their first key is the site (version_ is 0 until the
    // header is read).
    const bool compact = !f.has(B::kType) && version_ >= fmt::kVersion2 && f.has(B::kSite);
    if (!f.has(B::kType) && !compact) fail("record without \"type\"");
    if (line_number == first_line_) {
      if (f.type != fmt::kTypeHeader) fail("not a gpumemtrace trace (the first line is not a header)");
      return header(f);
    }
    if (result_.footer_seen && !warned_after_footer_) {
      result_.warnings.push_back("line " + std::to_string(line_number) + ": records after the footer");
      warned_after_footer_ = true;
    }
    if (compact) return compact_event(f);
    if (f.type == fmt::kTypeEvent) {
      if (version_ >= fmt::kVersion2) fail("a version 1 event line in a version 2 trace");
      return event(f);
    }
    if (f.type == fmt::kTypeSite && version_ >= fmt::kVersion2) return site(f);
    if (f.type == fmt::kTypeFrame) return frame(f);
    if (f.type == fmt::kTypeStack) return stack(f);
    if (f.type == fmt::kTypeModule) {
      if (!f.has(B::kId) || f.id == 0) fail("module without a valid \"id\"");
      if (symbols_.modules() >= kMaxModules && !symbols_.has_module(ModuleId(static_cast<uint32_t>(f.id)))) {
        too_many("modules", kMaxModules);
      }
      symbols_.add_module(ModuleId(static_cast<uint32_t>(f.id)), std::string(f.path));
      offline_text_bytes_ += f.path.size() + f.build_id.size();  // the offline symbolizer's copy
      check_text();
      offline_.add_module(ModuleId(static_cast<uint32_t>(f.id)), f.path, f.build_id);
      return;
    }
    if (f.type == fmt::kTypeDevice) {
      if (!f.has(B::kDevice)) fail("device record without \"device\"");
      DeviceInfo info;
      info.device = static_cast<int32_t>(f.device);
      info.name = std::string(f.name);
      info.total = f.total;
      info.free = f.free;
      info.has_free = f.has(B::kFree);
      if (f.has(B::kTotalExact)) note_clamped(fmt::kFieldTotalExact, std::to_string(f.total_exact));
      if (f.has(B::kFreeExact)) note_clamped(fmt::kFieldFreeExact, std::to_string(f.free_exact));
      return handler_.on_device(info);
    }
    if (f.type == fmt::kTypeDropped) {
      if (!f.has(B::kCount)) fail("dropped record without \"count\"");
      return handler_.on_dropped(f.count);
    }
    if (f.type == fmt::kTypeFooter) {
      result_.footer_seen = true;
      merger_.finish();  // the events before the footer, before it
      return handler_.on_footer(Footer{f.events, f.dropped_total, f.end_time, f.not_written, fmt::parse_end(f.end),
                                       static_cast<int32_t>(f.exit_status), static_cast<int32_t>(f.signal)});
    }
    if (f.type == fmt::kTypeCapped) {
      if (!f.has(B::kSeq)) fail("capped record without \"seq\"");
      if (f.t_negative) fail("field \"t\": expected an unsigned integer");
      if (result_.capped) fail("a second capped record");
      result_.capped = true;
      merger_.finish();  // the events before the cap, before it
      return handler_.on_capped(Capped{f.seq, f.t, f.size, f.max_bytes});
    }
    if (f.type == fmt::kTypeLive) return live(f);
    if (f.type == fmt::kTypeAllocatorSettings) return allocator_settings(f);
    if (f.type == fmt::kTypeGc) return gc(f);
    if (f.type == fmt::kTypePause) return handler_.on_pause(timeline_record(f, fmt::kTypePause, Op::Pause));
    if (f.type == fmt::kTypeResume) return handler_.on_pause(timeline_record(f, fmt::kTypeResume, Op::Resume));
    if (f.type == fmt::kTypeHeader) fail("a second header");
    // Unknown record types are skipped: version 1 readers ignore what they do not know.
    ignored_ = true;
  }

  void set_first_line(uint64_t line) { first_line_ = line; }

 private:
  void header(const Fields& f) {
    using B = Fields::Bit;
    if (!f.has(B::kFormat) || f.format != fmt::kFormatName) {
      fail("not a gpumemtrace trace (header \"format\" is not \"gpumemtrace\")");
    }
    if (!f.has(B::kVersion)) fail("header without \"version\"");
    if (f.version != static_cast<uint64_t>(fmt::kVersion1) && f.version != static_cast<uint64_t>(fmt::kVersion2)) {
      fail("unsupported trace version " + std::to_string(f.version) + " (this reader knows " +
           std::to_string(fmt::kVersion1) + " and " + std::to_string(fmt::kVersion2) + ")");
    }
    version_ = static_cast<int>(f.version);
    Header h;
    h.pid = f.pid;
    h.ppid = f.ppid;
    // A rank is a place in a job: a negative one is no place (not set).
    h.rank = std::max<int64_t>(f.rank, -1);
    h.local_rank = std::max<int64_t>(f.local_rank, -1);
    h.world_size = std::max<int64_t>(f.world_size, -1);
    h.rank_from = std::string(f.rank_from);
    h.exe = std::string(f.exe);
    h.host = std::string(f.host);
    h.library = std::string(f.library);
    h.backend = std::string(f.backend);
    h.cmdline = f.cmdline;
    h.start_time_ns = f.start_time;
    h.clock_start_ns = f.clock_start;
    h.env_alloc_conf = std::string(f.env_alloc_conf);
    h.env_cuda_alloc_conf = std::string(f.env_cuda_alloc_conf);
    h.env_hip_alloc_conf = std::string(f.env_hip_alloc_conf);
    handler_.on_header(h);
  }

  void frame(const Fields& f) {
    using B = Fields::Bit;
    if (!f.has(B::kId) || f.id == 0) fail("frame without a valid \"id\"");
    if (f.has(B::kModule) && f.module != 0 && !symbols_.has_module(ModuleId(static_cast<uint32_t>(f.module)))) {
      fail("frame refers to undefined module " + std::to_string(f.module));
    }
    SymbolTable::Frame frame;
    frame.function = std::string(f.function);
    frame.file = std::string(f.file);
    frame.line = static_cast<uint32_t>(f.line);
    frame.module = ModuleId(static_cast<uint32_t>(f.module));
    frame.ip = f.ip;
    frame.offset = f.offset;
    frame.python = f.lang == fmt::kLangPython;
    frame.inlined = f.inlined;
    if (OfflineSymbolizer::needs_symbols(frame, f.has(B::kFunction))) offline_.symbolize(frame);
    if (symbols_.frames() >= kMaxFrames) too_many("frames", kMaxFrames);
    if (!symbols_.add_frame(FrameId(static_cast<uint32_t>(f.id)), std::move(frame))) {
      fail("frame id " + std::to_string(f.id) + " defined twice");
    }
    check_text();
  }

  [[noreturn]] static void too_many(const char* what, uint64_t limit) {
    fail("more than " + std::to_string(limit) + " " + what + " defined (the reader's limit, docs/security.md)");
  }

  void check_text() const {
    if (symbols_.text_bytes() + site_text_bytes_ + offline_text_bytes_ > kMaxSymbolTextBytes) {
      fail("more than " + std::to_string(kMaxSymbolTextBytes >> 20) +
           " MiB of names defined (module paths, function, file and API names; the reader's limit, docs/security.md)");
    }
  }

  void stack(const Fields& f) {
    using B = Fields::Bit;
    if (!f.has(B::kId) || f.id == 0) fail("stack without a valid \"id\"");
    if (!f.has(B::kFrames)) fail("stack without \"frames\"");
    std::vector<FrameId> frames;
    frames.reserve(f.frames.size());
    for (uint32_t id : f.frames) {
      if (!symbols_.has_frame(FrameId(id))) fail("stack refers to undefined frame " + std::to_string(id));
      frames.push_back(FrameId(id));
    }
    const SymbolTable::Extent extent = symbols_.extent(frames);
    if (extent.frames > kMaxLogicalFrames) {
      fail("stack " + std::to_string(f.id) + " has " + std::to_string(extent.frames) + " frames with its inlined calls, more than " +
           std::to_string(kMaxLogicalFrames) + " (the reader's limit, docs/security.md)");
    }
    if (extent.text_bytes > kMaxStackTextBytes) {
      fail("stack " + std::to_string(f.id) + " has " + std::to_string(extent.text_bytes >> 10) +
           " KiB of names with its inlined calls, more than " + std::to_string(kMaxStackTextBytes >> 10) +
           " KiB (the reader's limit, docs/security.md)");
    }
    if (symbols_.stacks() >= kMaxStacks) too_many("stacks", kMaxStacks);
    stack_refs_ += frames.size();
    if (stack_refs_ > kMaxStackFrameRefs) {
      fail("more than " + std::to_string(kMaxStackFrameRefs) +
           " frame references in all stacks together (the reader's limit, docs/security.md)");
    }
    if (!symbols_.add_stack(StackId(static_cast<uint32_t>(f.id)), std::move(frames))) {
      fail("stack id " + std::to_string(f.id) + " defined twice");
    }
  }

  void event(const Fields& f) {
    using B = Fields::Bit;
    if (!f.has(B::kSeq)) fail("event without \"seq\"");
    if (f.seq <= last_seq_) {
      fail("event seq " + std::to_string(f.seq) + " does not increase (previous " +
           std::to_string(last_seq_) + ")");
    }
    if (result_.capped) fail("event after the capped record");
    last_seq_ = f.seq;
    const Event e = to_event(f, "event");
    if (e.op == Op::Sync) return merger_.sync(e.t);  // a promise for the reader, not a memory event
    ++result_.events;
    merger_.push(e);
  }

  // Version 2: what the events of one call site share, defined once (ids 1, 2, 3... in order).
  void site(const Fields& f) {
    using B = Fields::Bit;
    if (!f.has(B::kId) || f.id != sites_.size() + 1) {
      fail("site id " + std::to_string(f.id) + " out of order (the next is " + std::to_string(sites_.size() + 1) + ")");
    }
    Site e;
    if (!f.has(B::kOp)) fail("site without \"op\"");
    if (!fmt::parse_op(f.op, &e.op)) fail("unknown op \"" + std::string(f.op) + "\"");
    if (!f.kind.empty() && !fmt::parse_kind(f.kind, &e.kind)) fail("unknown kind \"" + std::string(f.kind) + "\"");
    if (!symbols_.has_stack(StackId(static_cast<uint32_t>(f.stack)))) {
      fail("site refers to undefined stack " + std::to_string(f.stack));
    }
    e.tid = f.tid;
    e.device = static_cast<int32_t>(f.device);
    e.stack = StackId(static_cast<uint32_t>(f.stack));
    e.delayed = f.delayed;
    if (sites_.size() >= kMaxSites) too_many("sites", kMaxSites);
    // Interned: a few API names serve every site (an unordered_set's elements never move).
    auto [api, added] = site_apis_.emplace(f.api);
    if (added) {
      site_text_bytes_ += api->size();
      check_text();
    }
    e.api = *api;
    sites_.push_back(e);
  }

  // Version 2 event line: the site's fields, then what this line says.
  void compact_event(const Fields& f) {
    using B = Fields::Bit;
    if (f.site == 0 || f.site > sites_.size()) fail("event refers to undefined site " + std::to_string(f.site));
    const uint64_t seq = f.has(B::kSeqJump) ? f.seq_jump : last_seq_ + 1;
    if (seq <= last_seq_) {
      fail("event seq " + std::to_string(seq) + " does not increase (previous " + std::to_string(last_seq_) + ")");
    }
    if (result_.capped) fail("event after the capped record");
    last_seq_ = seq;
    last_time_ += f.t;  // a signed delta, as two's complement: wraps like the subtraction that made it
    const Site& site = sites_[f.site - 1];
    if (f.short_addr > UINT64_MAX - f.short_size) fail("address range overflows 64 bits");
    Event e;
    e.op = site.op;
    e.kind = site.kind;
    e.tid = site.tid;
    e.device = site.device;
    e.stack = site.stack;
    e.delayed = site.delayed;
    e.api = site.api;
    e.seq = seq;
    e.t = last_time_;
    e.addr = f.short_addr;
    e.size = f.short_size;
    e.result = f.short_result;
    e.initial = f.initial;  // a flight recorder's checkpoint (interpose/writer/flight.cpp)
    fill_optional(f, e);
    exact_values(f, e);
    if (e.op == Op::Sync) return merger_.sync(e.t);
    ++result_.events;
    merger_.push(e);
  }

  // A "live" record: an allocation still live at the end of a capped trace (its seq is its own
  // allocation's, so it does not follow the event order).
  void live(const Fields& f) {
    if (!result_.capped) fail("live record before the capped record");
    const Event e = to_event(f, "live record");
    if (e.op != Op::Alloc && e.op != Op::BlockAlloc) fail("live record with op other than alloc or block_alloc");
    handler_.on_live(e);
  }

  // What the records placed in the timeline as live events share (allocator_settings, gc): absolute
  // seq and t; the seq above the event lines' before it (they do not move the lines' deltas, as a
  // "live" record does not); none after the capped record.
  Event timeline_record(const Fields& f, const std::string& type, Op op) {
    using B = Fields::Bit;
    if (!f.has(B::kSeq)) fail(type + " record without \"seq\"");
    if (f.t_negative) fail("field \"t\": expected an unsigned integer");
    if (f.seq <= last_seq_) {
      fail(type + " seq " + std::to_string(f.seq) + " does not increase (previous " + std::to_string(last_seq_) + ")");
    }
    if (result_.capped) fail(type + " record after the capped record");
    Event e;
    e.op = op;
    e.kind = Kind::None;
    e.seq = f.seq;
    e.t = f.t;
    e.tid = f.tid;
    return e;
  }

  // An "allocator_settings" record: merged into the timeline as a live event at its t (it was recorded
  // live), handed on through on_allocator_settings.
  void allocator_settings(const Fields& f) {
    Event e = timeline_record(f, fmt::kTypeAllocatorSettings, Op::AllocatorSettings);
    if (f.has_fraction && !(f.fraction >= 0.0 && f.fraction <= 1.0)) fail("field \"fraction\": expected 0 to 1");
    e.device = static_cast<int32_t>(f.device);
    e.api = f.source;
    e.label = f.conf;
    e.fraction = f.fraction;
    e.has_fraction = f.has_fraction;
    merger_.push(e);
  }

  // A "gc" record: a garbage collection from t to end_time on thread tid, recorded when it ended (its
  // seq). Merged into the timeline as a live event, like allocator_settings, handed on through on_gc.
  void gc(const Fields& f) {
    Event e = timeline_record(f, fmt::kTypeGc, Op::Gc);
    if (f.end_time < f.t) fail("gc record ends (end_time) before it begins (t)");
    e.end_time = f.end_time;
    merger_.push(e);
  }

  // The fields shared by event and live records; `what` names the record in errors.
  Event to_event(const Fields& f, const char* what) {
    using B = Fields::Bit;
    Event e;
    if (!f.has(B::kOp)) fail(std::string(what) + " without \"op\"");
    if (f.t_negative) fail("field \"t\": expected an unsigned integer");
    if (!fmt::parse_op(f.op, &e.op)) fail("unknown op \"" + std::string(f.op) + "\"");
    if (!f.kind.empty() && !fmt::parse_kind(f.kind, &e.kind)) {
      fail("unknown kind \"" + std::string(f.kind) + "\"");
    }
    if (!symbols_.has_stack(StackId(static_cast<uint32_t>(f.stack)))) {
      fail("event refers to undefined stack " + std::to_string(f.stack));
    }
    if (f.addr > UINT64_MAX - f.size) fail("address range overflows 64 bits");
    e.seq = f.seq;
    e.t = f.t;
    e.tid = f.tid;
    e.addr = f.addr;
    e.size = f.size;
    e.device = static_cast<int32_t>(f.device);
    e.stack = StackId(static_cast<uint32_t>(f.stack));
    e.result = f.result;
    e.api = f.api;
    e.delayed = f.delayed;
    e.initial = f.initial;
    fill_optional(f, e);
    exact_values(f, e);
    return e;
  }

  // The values the recorder clamped (format.h, "*_exact"): counted for the warning; a failed request
  // (an allocation that failed, an allocator's OOM: no memory range) gets its exact size back, so the
  // report names what the program asked for.
  void exact_values(const Fields& f, Event& e) {
    using B = Fields::Bit;
    if (f.has(B::kSizeExact)) {
      note_clamped(fmt::kFieldSizeExact, f.size_out_of_range ? std::string(fmt::kOutOfRange) : std::to_string(f.size_exact));
      const bool request = e.op == Op::BlockOom || (e.op == Op::Alloc && e.result != 0);
      if (request && f.size_exact > e.size && e.addr <= UINT64_MAX - f.size_exact) e.size = f.size_exact;
    }
    if (f.has(B::kDeviceExact)) note_clamped(fmt::kFieldDeviceExact, std::to_string(f.device_exact));
    if (f.has(B::kFreeExact)) note_clamped(fmt::kFieldFreeExact, std::to_string(f.free_exact));
    if (f.has(B::kTotalExact)) note_clamped(fmt::kFieldTotalExact, std::to_string(f.total_exact));
  }

  void note_clamped(const char* field, const std::string& value) {
    if (clamped_++ == 0) clamped_first_ = std::string(field) + " " + value + " on line " + std::to_string(line_);
  }

  // The optional event fields, named alike in both versions.
  static void fill_optional(const Fields& f, Event& e) {
    using B = Fields::Bit;
    e.segment = f.segment;
    e.has_segment = f.has(B::kSegment);
    e.handle = f.handle;
    e.has_handle = f.has(B::kHandle);
    e.stream = f.stream;
    e.free = f.free;
    e.total = f.total;
    e.has_meminfo = f.has(B::kFree) || f.has(B::kTotal);
    e.pool = f.pool;
    e.label = f.label;
    e.range = f.range;
  }

  SymbolTable& symbols_;
  TraceHandler& handler_;
  ReadResult& result_;
  EventMerger merger_;
  OfflineSymbolizer offline_;  // frames recorded with GPUMEMTRACE_SYMBOLIZE=0
  uint64_t first_line_ = 1;
  uint64_t last_seq_ = 0;
  uint64_t last_time_ = 0;  // version 2: t of the previous event line
  int version_ = 0;         // the header's; 0 until it is read
  // Version 2: what a site gives its events (40 bytes, not an Event's 200: a trace may define a
  // million sites).
  struct Site {
    uint64_t tid = 0;
    std::string_view api;  // into site_apis_
    int32_t device = -1;
    StackId stack;
    Op op = Op::Mark;
    Kind kind = Kind::None;
    bool delayed = false;
  };
  std::deque<Site> sites_;  // site id - 1 -> the fields it gives events (a deque: no doubling copy)
  std::unordered_set<std::string> site_apis_;  // their api names, interned
  uint64_t site_text_bytes_ = 0;             // the bytes of those names
  uint64_t stack_refs_ = 0;                  // frame references of the stacks defined
  uint64_t offline_text_bytes_ = 0;          // module paths and build ids the offline symbolizer keeps
  bool warned_after_footer_ = false;
  bool ignored_ = false;     // the last record dispatched was one this reader skips
  uint64_t line_ = 0;        // the line being dispatched
  uint64_t clamped_ = 0;     // values the recorder clamped (format.h, "*_exact")
  std::string clamped_first_;
};

}  // namespace

ReadResult read_trace(ByteSource& source, const std::string& name, SymbolTable& symbols,
                      TraceHandler& handler) {
  ReadResult result;
  LineReader lines(source);
  od::parser parser;
  Fields fields;
  Dispatcher dispatcher(symbols, handler, result);
  Line line;
  bool seen_header = false;
  // Bytes read since the last record this reader uses: blank lines and skipped records. A stream
  // that goes on without one (a zstd "newline bomb": a few KB that expand to gigabytes of '\n') is
  // stopped within a second or so, not read to its end.
  uint64_t without_record = 0;
  auto idle = [&](const Line& l) {
    without_record += l.text.size() + 1;
    if (without_record > kMaxBytesWithoutRecord) {
      throw LineError{"no record in the last " + std::to_string(kMaxBytesWithoutRecord >> 20) +
                      " MiB (blank lines or records this reader skips): not a gpumemtrace trace"};
    }
  };
  try {
    while (lines.next(line)) {
      result.lines = line.number;
      if (blank(line.text)) {
        if (!seen_header) dispatcher.set_first_line(line.number + 1);
        idle(line);
        continue;
      }
      fields.strings.set_line(line.number);
      try {
        const bool compact = dispatcher.version() >= fmt::kVersion2 && line.text.substr(0, 5) == "{\"e\":" &&
                             CompactEventScanner(line.text).scan(fields);
        if (!compact) parse_line(parser, line, fields, dispatcher.version());
      } catch (const LineError& error) {
        // A writer killed mid-line leaves an unterminated last line: warn and keep what came before.
        if (!line.terminated && seen_header) {
          result.truncated = true;
          result.warnings.push_back("line " + std::to_string(line.number) +
                                    ": truncated last line ignored (process killed?)");
          break;
        }
        if (!seen_header) throw LineError{"not a gpumemtrace trace (the first line is not a JSON header: " + error.message + ")"};
        throw;
      }
      dispatcher.dispatch(fields, line.number);
      seen_header = true;
      if (dispatcher.ignored()) idle(line);
      else without_record = 0;
    }
  } catch (const LineError& error) {
    throw TraceError(name, line.number, error.message);
  } catch (const std::runtime_error& error) {
    if (dynamic_cast<const TraceError*>(&error)) throw;
    throw TraceError(name, line.number + 1, error.what());  // I/O or zstd error
  }
  if (!seen_header && source.truncated()) throw TraceCutBeforeFirstLine(name);
  if (!seen_header) throw TraceError(name, 1, "empty file: not a gpumemtrace trace");
  dispatcher.finish();
  if (fields.strings.count()) result.warnings.push_back(fields.strings.warning());
  if (source.truncated() && !result.truncated) {
    result.truncated = true;
    result.warnings.push_back("compressed stream cut short after line " + std::to_string(result.lines) +
                              " (process killed?)");
  }
  return result;
}

}  // namespace gpumemtrace::report
