// report/reader/line_parser.cpp — see line_parser.h.
#include "report/reader/line_parser.h"

namespace gpumemtrace::report::reader {
namespace od = simdjson::ondemand;

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "lines must carry simdjson's padding");

namespace {

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

}  // namespace

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

}  // namespace gpumemtrace::report::reader
