// report/import/pickle_reader.cpp — see pickle_reader.h. Opcode values and semantics follow
// CPython's Lib/pickletools.py (the reference documentation of the pickle virtual machine).
#include "report/import/pickle_reader.h"

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace gpumemtrace::pickle {

namespace {

// What this reader does with each opcode. Anything absent from the table is "unknown".
enum class Role : uint8_t { Unknown, Accepted, Forbidden, TextProtocol };

struct OpInfo {
  const char* name;
  Role role;
};

// X(byte, name, role)
#define PICKLE_OPCODES(X)                                                        \
  X(0x28, "MARK", Accepted)                                                      \
  X(0x2e, "STOP", Accepted)                                                      \
  X(0x30, "POP", Accepted)                                                       \
  X(0x31, "POP_MARK", Accepted)                                                  \
  X(0x32, "DUP", Accepted)                                                       \
  X(0x46, "FLOAT", TextProtocol)                                                 \
  X(0x49, "INT", TextProtocol)                                                   \
  X(0x4a, "BININT", Accepted)                                                    \
  X(0x4b, "BININT1", Accepted)                                                   \
  X(0x4c, "LONG", TextProtocol)                                                  \
  X(0x4d, "BININT2", Accepted)                                                   \
  X(0x4e, "NONE", Accepted)                                                      \
  X(0x50, "PERSID", Forbidden)                                                   \
  X(0x51, "BINPERSID", Forbidden)                                                \
  X(0x52, "REDUCE", Forbidden)                                                   \
  X(0x53, "STRING", TextProtocol)                                                \
  X(0x54, "BINSTRING", Accepted)                                                 \
  X(0x55, "SHORT_BINSTRING", Accepted)                                           \
  X(0x56, "UNICODE", TextProtocol)                                               \
  X(0x58, "BINUNICODE", Accepted)                                                \
  X(0x61, "APPEND", Accepted)                                                    \
  X(0x62, "BUILD", Forbidden)                                                    \
  X(0x63, "GLOBAL", Forbidden)                                                   \
  X(0x64, "DICT", Accepted)                                                      \
  X(0x7d, "EMPTY_DICT", Accepted)                                                \
  X(0x65, "APPENDS", Accepted)                                                   \
  X(0x67, "GET", TextProtocol)                                                   \
  X(0x68, "BINGET", Accepted)                                                    \
  X(0x69, "INST", Forbidden)                                                     \
  X(0x6a, "LONG_BINGET", Accepted)                                               \
  X(0x6c, "LIST", Accepted)                                                      \
  X(0x5d, "EMPTY_LIST", Accepted)                                                \
  X(0x6f, "OBJ", Forbidden)                                                      \
  X(0x70, "PUT", TextProtocol)                                                   \
  X(0x71, "BINPUT", Accepted)                                                    \
  X(0x72, "LONG_BINPUT", Accepted)                                               \
  X(0x73, "SETITEM", Accepted)                                                   \
  X(0x74, "TUPLE", Accepted)                                                     \
  X(0x29, "EMPTY_TUPLE", Accepted)                                               \
  X(0x75, "SETITEMS", Accepted)                                                  \
  X(0x47, "BINFLOAT", Accepted)                                                  \
  X(0x80, "PROTO", Accepted)                                                     \
  X(0x81, "NEWOBJ", Forbidden)                                                   \
  X(0x82, "EXT1", Forbidden)                                                     \
  X(0x83, "EXT2", Forbidden)                                                     \
  X(0x84, "EXT4", Forbidden)                                                     \
  X(0x85, "TUPLE1", Accepted)                                                    \
  X(0x86, "TUPLE2", Accepted)                                                    \
  X(0x87, "TUPLE3", Accepted)                                                    \
  X(0x88, "NEWTRUE", Accepted)                                                   \
  X(0x89, "NEWFALSE", Accepted)                                                  \
  X(0x8a, "LONG1", Accepted)                                                     \
  X(0x8b, "LONG4", Accepted)                                                     \
  X(0x42, "BINBYTES", Accepted)                                                  \
  X(0x43, "SHORT_BINBYTES", Accepted)                                            \
  X(0x8c, "SHORT_BINUNICODE", Accepted)                                          \
  X(0x8d, "BINUNICODE8", Accepted)                                               \
  X(0x8e, "BINBYTES8", Accepted)                                                 \
  X(0x8f, "EMPTY_SET", Accepted)                                                 \
  X(0x90, "ADDITEMS", Accepted)                                                  \
  X(0x91, "FROZENSET", Accepted)                                                 \
  X(0x92, "NEWOBJ_EX", Forbidden)                                                \
  X(0x93, "STACK_GLOBAL", Forbidden)                                             \
  X(0x94, "MEMOIZE", Accepted)                                                   \
  X(0x95, "FRAME", Accepted)                                                     \
  X(0x96, "BYTEARRAY8", Accepted)                                                \
  X(0x97, "NEXT_BUFFER", Forbidden)                                              \
  X(0x98, "READONLY_BUFFER", Forbidden)

struct OpTable {
  OpInfo ops[256];
  OpTable() {
    for (auto& op : ops) op = {nullptr, Role::Unknown};
#define PICKLE_OP_ROW(byte, name, role) ops[byte] = {name, Role::role};
    PICKLE_OPCODES(PICKLE_OP_ROW)
#undef PICKLE_OP_ROW
  }
};

const OpInfo& op_info(uint8_t op) {
  static const OpTable table;
  return table.ops[op];
}

std::string describe_op(uint8_t op) {
  const OpInfo& info = op_info(op);
  char buf[64];
  if (op >= 0x20 && op < 0x7f)
    snprintf(buf, sizeof buf, " (0x%02x '%c')", op, static_cast<char>(op));
  else
    snprintf(buf, sizeof buf, " (0x%02x)", op);
  return std::string(info.name ? info.name : "unknown opcode") + buf;
}

const std::vector<uint32_t> kNoItems;

// Reads one pickle into `nodes`. Every failure throws ParseError (fail()) naming the opcode's offset.
class Parser {
 public:
  Parser(const std::string& data, std::vector<Node>* nodes, const Limits& limits)
      : data_(data), nodes_(*nodes), limits_(limits) {}

  // The root node (the value STOP found on the stack).
  uint32_t run();

 private:
  [[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void need(uint64_t n) {
    if (data_.size() - pos_ < n)
      fail("truncated pickle: %s needs %" PRIu64 " more bytes at offset %zu", describe_op(op_).c_str(), n, pos_);
  }
  uint64_t read_le(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  uint64_t need_le(int n) {
    need(n);
    return read_le(n);
  }
  uint32_t new_node(Kind kind) {
    if (nodes_.size() >= limits_.max_nodes) fail("pickle has more than %u values (limit)", limits_.max_nodes);
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  uint32_t push_new(Kind kind) {
    const uint32_t i = new_node(kind);
    stack_.push_back(i);
    return i;
  }
  // None, True and False are never modified (only containers are): one node each, shared, so a
  // 1-byte opcode costs a stack slot, not a node.
  void push_shared(uint32_t* shared, Kind kind, bool boolean) {
    if (*shared == kNoNode) {
      *shared = new_node(kind);
      nodes_[*shared].boolean = boolean;
    }
    stack_.push_back(*shared);
  }
  void push_int_signed(int64_t v) { nodes_[push_new(Kind::Int)].bits = static_cast<uint64_t>(v); }
  void push_string(Kind kind, uint64_t len) {
    need(len);
    const uint32_t i = push_new(kind);
    nodes_[i].str_off = pos_;
    nodes_[i].str_len = len;
    pos_ += len;
  }
  // A 4-byte signed length (BINSTRING, LONG4): negative is malformed.
  uint64_t need_signed_length(const char* op) {
    const int32_t n = static_cast<int32_t>(static_cast<uint32_t>(need_le(4)));
    if (n < 0) fail("%s at offset %zu: negative length", op, op_pos_);
    return static_cast<uint64_t>(n);
  }
  void push_long(uint64_t n);
  size_t pop_mark() {
    if (marks_.empty()) fail("%s at offset %zu without a MARK", describe_op(op_).c_str(), op_pos_);
    const size_t begin = marks_.back();
    marks_.pop_back();
    if (begin > stack_.size()) fail("corrupt MARK at offset %zu", op_pos_);
    return begin;
  }
  void need_stack(size_t n) {
    // Items above the innermost MARK are the only ones an opcode may consume.
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail("%s at offset %zu: stack underflow", describe_op(op_).c_str(), op_pos_);
  }
  // The container `depth_from_top` below the top of the stack, which must be a `want`.
  uint32_t container_at(size_t depth_from_top, Kind want) {
    uint32_t c = stack_[stack_.size() - 1 - depth_from_top];
    Kind k = nodes_[c].kind;
    if (k != want)
      fail("%s at offset %zu: target is a %s, not a %s", describe_op(op_).c_str(), op_pos_, kind_name(k),
           kind_name(want));
    return c;
  }
  void collect(Kind kind) {  // LIST, TUPLE, DICT, FROZENSET: items since the MARK
    const size_t begin = pop_mark();
    if (kind == Kind::Dict && (stack_.size() - begin) % 2 != 0) fail("DICT at offset %zu: odd number of items", op_pos_);
    const uint32_t i = new_node(kind);
    nodes_[i].items.assign(stack_.begin() + begin, stack_.end());
    stack_.resize(begin);
    stack_.push_back(i);
  }
  // APPENDS, ADDITEMS, SETITEMS: the items since the MARK go into the container just below it.
  void extend_below_mark(Kind want, const char* name) {
    const size_t begin = pop_mark();
    if (begin == 0) fail("%s at offset %zu: no target below the MARK", name, op_pos_);
    const uint32_t c = stack_[begin - 1];
    if (nodes_[c].kind != want)
      fail("%s at offset %zu: target is a %s, not a %s", name, op_pos_, kind_name(nodes_[c].kind), kind_name(want));
    if (want == Kind::Dict && (stack_.size() - begin) % 2 != 0) fail("%s at offset %zu: odd number of items", name, op_pos_);
    nodes_[c].items.insert(nodes_[c].items.end(), stack_.begin() + begin, stack_.end());
    stack_.resize(begin);
  }
  void tuple_n(size_t n) {
    need_stack(n);
    const uint32_t i = new_node(Kind::Tuple);
    nodes_[i].items.assign(stack_.end() - n, stack_.end());
    stack_.resize(stack_.size() - n);
    stack_.push_back(i);
  }
  void memo_put(uint64_t key) {
    if (stack_.empty()) fail("%s at offset %zu: empty stack", describe_op(op_).c_str(), op_pos_);
    memo_[key] = stack_.back();
  }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end())
      fail("%s at offset %zu: memo key %" PRIu64 " is not defined", describe_op(op_).c_str(), op_pos_, key);
    stack_.push_back(it->second);
  }
  // Executes the opcode just read (op_); false at STOP.
  bool step();

  const std::string& data_;
  std::vector<Node>& nodes_;
  const Limits& limits_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  uint8_t op_ = 0;
  std::vector<uint32_t> stack_;
  uint32_t none_ = kNoNode, true_ = kNoNode, false_ = kNoNode;  // the shared nodes (push_shared)
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
};

void Parser::fail(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  throw ParseError(buf, op_pos_);
}

// LONG1 / LONG4: n bytes, little-endian two's complement.
void Parser::push_long(uint64_t n) {
  need(n);
  Node& node = nodes_[push_new(Kind::Int)];
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data_.data()) + pos_;
  pos_ += n;
  if (n == 0) return;  // LONG1 0 is the integer 0
  const bool negative = (p[n - 1] & 0x80) != 0;
  const uint8_t fill = negative ? 0xff : 0x00;
  uint64_t low = 0;
  for (uint64_t b = 0; b < n && b < 8; ++b) low |= static_cast<uint64_t>(p[b]) << (8 * b);
  if (n < 8) {  // sign-extend
    if (negative) low |= ~0ull << (8 * n);
    node.bits = low;
    return;
  }
  bool high_is_fill = true;
  for (uint64_t b = 8; b < n; ++b) high_is_fill = high_is_fill && p[b] == fill;
  const bool low_sign = (low >> 63) != 0;
  if (high_is_fill && low_sign == negative) {
    node.bits = low;  // fits int64
  } else if (!negative && high_is_fill) {
    node.bits = low;  // 9+ bytes, non-negative, fits uint64
    node.int_range = IntRange::Unsigned64;
  } else {
    node.int_range = IntRange::TooLarge;
  }
}

uint32_t Parser::run() {
  for (;;) {
    op_pos_ = pos_;
    if (pos_ >= data_.size()) fail("truncated pickle: no STOP opcode before the end (offset %zu)", pos_);
    op_ = static_cast<uint8_t>(data_[pos_++]);
    const OpInfo& info = op_info(op_);
    if (info.role == Role::Forbidden)
      fail("forbidden pickle opcode %s at offset %zu: it can run code; only plain data "
           "(dict, list, tuple, str, bytes, int, float, bool, None) is accepted",
           describe_op(op_).c_str(), op_pos_);
    if (info.role == Role::TextProtocol)
      fail("unsupported pickle opcode %s at offset %zu: text protocols 0 and 1 are not read, "
           "only protocols 2 to 5", describe_op(op_).c_str(), op_pos_);
    if (info.role == Role::Unknown) fail("invalid pickle opcode 0x%02x at offset %zu", op_, op_pos_);
    if (!step()) return stack_.back();
  }
}

bool Parser::step() {
  switch (op_) {
    case 0x80: {  // PROTO
      const unsigned proto = static_cast<unsigned>(need_le(1));
      if (proto < 2 || proto > 5) fail("unsupported pickle protocol %u (2 to 5 are read)", proto);
      break;
    }
    case 0x95: {  // FRAME: an 8-byte length; frames are only a buffering hint, read straight through
      const uint64_t len = need_le(8);
      if (len > data_.size() - pos_)
        fail("truncated pickle: FRAME at offset %zu announces %" PRIu64 " bytes, %zu remain", op_pos_, len,
             data_.size() - pos_);
      break;
    }
    case 0x2e:  // STOP
      if (stack_.empty()) fail("STOP at offset %zu with an empty stack", op_pos_);
      return false;
    case 0x28:  // MARK
      if (marks_.size() >= limits_.max_mark_depth)
        fail("MARK at offset %zu: nesting deeper than %u", op_pos_, limits_.max_mark_depth);
      marks_.push_back(stack_.size());
      break;
    case 0x30:  // POP
      if (!marks_.empty() && marks_.back() == stack_.size()) {  // pops a mark
        marks_.pop_back();
        break;
      }
      need_stack(1);
      stack_.pop_back();
      break;
    case 0x31: stack_.resize(pop_mark()); break;  // POP_MARK
    case 0x32:  // DUP
      need_stack(1);
      stack_.push_back(stack_.back());
      break;
    case 0x4e: push_shared(&none_, Kind::None, false); break;
    case 0x88: push_shared(&true_, Kind::Bool, true); break;    // NEWTRUE
    case 0x89: push_shared(&false_, Kind::Bool, false); break;  // NEWFALSE
    case 0x4a: push_int_signed(static_cast<int32_t>(static_cast<uint32_t>(need_le(4)))); break;  // BININT
    case 0x4b: push_int_signed(static_cast<int64_t>(need_le(1))); break;                         // BININT1
    case 0x4d: push_int_signed(static_cast<int64_t>(need_le(2))); break;                         // BININT2
    case 0x8a: push_long(need_le(1)); break;                                                     // LONG1
    case 0x8b: push_long(need_signed_length("LONG4")); break;
    case 0x47: {  // BINFLOAT: big-endian IEEE double
      need(8);
      uint64_t v = 0;
      for (int b = 0; b < 8; ++b) v = (v << 8) | static_cast<uint8_t>(data_[pos_ + b]);
      pos_ += 8;
      memcpy(&nodes_[push_new(Kind::Float)].real, &v, sizeof v);
      break;
    }
    case 0x55:  // SHORT_BINSTRING (a Python 2 str, read as text)
    case 0x8c:  // SHORT_BINUNICODE
      push_string(Kind::Str, need_le(1));
      break;
    case 0x54: push_string(Kind::Str, need_signed_length("BINSTRING")); break;
    case 0x58: push_string(Kind::Str, need_le(4)); break;    // BINUNICODE
    case 0x8d: push_string(Kind::Str, need_le(8)); break;    // BINUNICODE8
    case 0x43: push_string(Kind::Bytes, need_le(1)); break;  // SHORT_BINBYTES
    case 0x42: push_string(Kind::Bytes, need_le(4)); break;  // BINBYTES
    case 0x8e:  // BINBYTES8
    case 0x96:  // BYTEARRAY8
      push_string(Kind::Bytes, need_le(8));
      break;
    case 0x29: push_new(Kind::Tuple); break;   // EMPTY_TUPLE
    case 0x5d: push_new(Kind::List); break;    // EMPTY_LIST
    case 0x8f: push_new(Kind::List); break;    // EMPTY_SET, represented as a list
    case 0x7d: push_new(Kind::Dict); break;    // EMPTY_DICT
    case 0x85: tuple_n(1); break;
    case 0x86: tuple_n(2); break;
    case 0x87: tuple_n(3); break;
    case 0x74: collect(Kind::Tuple); break;    // TUPLE
    case 0x6c: collect(Kind::List); break;     // LIST
    case 0x91: collect(Kind::List); break;     // FROZENSET, represented as a list
    case 0x64: collect(Kind::Dict); break;     // DICT
    case 0x61: {  // APPEND: list, value
      need_stack(2);
      nodes_[container_at(1, Kind::List)].items.push_back(stack_.back());
      stack_.pop_back();
      break;
    }
    case 0x65:  // APPENDS: list, MARK, values...
    case 0x90:  // ADDITEMS: set, MARK, values...
      extend_below_mark(Kind::List, describe_op(op_).c_str());
      break;
    case 0x73: {  // SETITEM: dict, key, value
      need_stack(3);
      auto& items = nodes_[container_at(2, Kind::Dict)].items;
      items.push_back(stack_[stack_.size() - 2]);
      items.push_back(stack_.back());
      stack_.resize(stack_.size() - 2);
      break;
    }
    case 0x75: extend_below_mark(Kind::Dict, "SETITEMS"); break;  // SETITEMS: dict, MARK, key, value, ...
    case 0x94: memo_put(memo_.size()); break;                      // MEMOIZE
    case 0x71: memo_put(need_le(1)); break;                        // BINPUT
    case 0x72: memo_put(need_le(4)); break;                        // LONG_BINPUT
    case 0x68: memo_get(need_le(1)); break;                        // BINGET
    case 0x6a: memo_get(need_le(4)); break;                        // LONG_BINGET
    default:
      fail("pickle opcode %s at offset %zu is not handled", describe_op(op_).c_str(), op_pos_);
  }
  return true;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
  }
  return "unknown";
}

std::string_view Document::str(uint32_t index) const {
  if (index >= nodes_.size()) return {};
  const Node& n = nodes_[index];
  if (n.kind != Kind::Str && n.kind != Kind::Bytes) return {};
  return std::string_view(data_).substr(n.str_off, n.str_len);
}

uint32_t Document::get(uint32_t dict, std::string_view key) const {
  if (!is(dict, Kind::Dict)) return kNoNode;
  const auto& it = nodes_[dict].items;
  if (it.size() > 2 * kIndexedDictItems) {
    auto found = wide_dict_index_.find(DictKey{dict, key});
    return found == wide_dict_index_.end() ? kNoNode : found->second;
  }
  for (size_t i = it.size(); i >= 2; i -= 2) {
    uint32_t k = it[i - 2];
    if (nodes_[k].kind == Kind::Str && str(k) == key) return it[i - 1];
  }
  return kNoNode;
}

void Document::index_wide_dicts() {
  wide_dict_index_.clear();
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.kind != Kind::Dict || n.items.size() <= 2 * kIndexedDictItems) continue;
    for (size_t k = 0; k + 1 < n.items.size(); k += 2) {
      if (nodes_[n.items[k]].kind == Kind::Str) wide_dict_index_[DictKey{i, str(n.items[k])}] = n.items[k + 1];
    }
  }
}

bool Document::as_u64(uint32_t index, uint64_t* out) const {
  if (index >= nodes_.size()) return false;
  const Node& n = nodes_[index];
  if (n.kind == Kind::Bool) { *out = n.boolean; return true; }
  if (n.kind != Kind::Int || n.int_range == IntRange::TooLarge) return false;
  if (n.int_range == IntRange::Signed64 && static_cast<int64_t>(n.bits) < 0) return false;
  *out = n.bits;
  return true;
}

bool Document::as_i64(uint32_t index, int64_t* out) const {
  if (index >= nodes_.size()) return false;
  const Node& n = nodes_[index];
  if (n.kind == Kind::Bool) { *out = n.boolean; return true; }
  if (n.kind != Kind::Int || n.int_range != IntRange::Signed64) return false;
  *out = static_cast<int64_t>(n.bits);
  return true;
}

bool Document::as_double(uint32_t index, double* out) const {
  if (index >= nodes_.size()) return false;
  const Node& n = nodes_[index];
  if (n.kind == Kind::Float) { *out = n.real; return true; }
  if (n.kind == Kind::Int && n.int_range == IntRange::Signed64) { *out = static_cast<double>(static_cast<int64_t>(n.bits)); return true; }
  if (n.kind == Kind::Int && n.int_range == IntRange::Unsigned64) { *out = static_cast<double>(n.bits); return true; }
  return false;
}

const std::vector<uint32_t>& Document::items(uint32_t index) const {
  if (index >= nodes_.size()) return kNoItems;
  const Node& n = nodes_[index];
  if (n.kind == Kind::List || n.kind == Kind::Tuple || n.kind == Kind::Dict) return n.items;
  return kNoItems;
}

namespace {
void dump_into(const Document& doc, uint32_t index, int depth, size_t max_chars, std::string* out) {
  if (out->size() > max_chars) return;
  const Node& n = doc.node(index);
  char buf[64];
  switch (n.kind) {
    case Kind::None: *out += "None"; return;
    case Kind::Bool: *out += n.boolean ? "True" : "False"; return;
    case Kind::Int:
      if (n.int_range == IntRange::TooLarge) *out += "<int beyond 64 bits>";
      else if (n.int_range == IntRange::Unsigned64) { snprintf(buf, sizeof buf, "%" PRIu64, n.bits); *out += buf; }
      else { snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(n.bits)); *out += buf; }
      return;
    case Kind::Float: snprintf(buf, sizeof buf, "%.17g", n.real); *out += buf; return;
    case Kind::Str:
    case Kind::Bytes: {
      *out += n.kind == Kind::Bytes ? "b'" : "'";
      for (unsigned char c : doc.str(index)) {
        if (c == '\'' || c == '\\') { *out += '\\'; *out += static_cast<char>(c); }
        else if (c < 0x20 || c == 0x7f) { snprintf(buf, sizeof buf, "\\x%02x", c); *out += buf; }
        else *out += static_cast<char>(c);
        if (out->size() > max_chars) return;
      }
      *out += "'";
      return;
    }
    case Kind::List:
    case Kind::Tuple:
    case Kind::Dict: {
      const char* open = n.kind == Kind::List ? "[" : n.kind == Kind::Tuple ? "(" : "{";
      const char* close = n.kind == Kind::List ? "]" : n.kind == Kind::Tuple ? ")" : "}";
      *out += open;
      if (depth <= 0 && !n.items.empty()) { *out += "..."; *out += close; return; }
      for (size_t i = 0; i < n.items.size(); ++i) {
        if (out->size() > max_chars) return;
        if (i) *out += (n.kind == Kind::Dict && i % 2 == 1) ? ": " : ", ";
        dump_into(doc, n.items[i], depth - 1, max_chars, out);
      }
      if (n.kind == Kind::Tuple && n.items.size() == 1) *out += ",";
      *out += close;
      return;
    }
  }
}
}  // namespace

std::string Document::dump(uint32_t index, int max_depth, size_t max_chars) const {
  std::string out;
  if (index >= nodes_.size()) return "<none>";
  dump_into(*this, index, max_depth, max_chars, &out);
  if (out.size() > max_chars) { out.resize(max_chars); out += "..."; }
  return out;
}

void parse(std::string data, Document* doc, const Limits& limits) {
  if (data.size() > limits.max_input_bytes)
    throw ParseError("pickle is larger than the limit of " + std::to_string(limits.max_input_bytes) + " bytes");
  doc->data_ = std::move(data);
  doc->nodes_.clear();
  doc->wide_dict_index_.clear();
  doc->root_ = kNoNode;
  Parser parser(doc->data_, &doc->nodes_, limits);
  try {
    doc->root_ = parser.run();
  } catch (const ParseError&) {
    doc->nodes_.clear();
    doc->nodes_.shrink_to_fit();
    throw;
  }
  doc->index_wide_dicts();
}

void parse_file(const std::string& path, Document* doc, const Limits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ParseError(std::string("cannot open: ") + strerror(errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) throw ParseError("cannot read the file size");
  if (static_cast<uint64_t>(size) > limits.max_input_bytes)
    throw ParseError("file is larger than the limit of " + std::to_string(limits.max_input_bytes) + " bytes");
  std::string data(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(&data[0], size)) throw ParseError(std::string("read error: ") + strerror(errno));
  parse(std::move(data), doc, limits);
}

bool looks_like_pickle_bytes(std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x80 && static_cast<uint8_t>(head[1]) >= 2 &&
         static_cast<uint8_t>(head[1]) <= 5;
}

}  // namespace gpumemtrace::pickle
