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

class Parser {
 public:
  Parser(const std::string& data, std::vector<Node>* nodes, const Limits& limits)
      : data_(data), nodes_(*nodes), limits_(limits) {}

  bool run(uint32_t* root, std::string* error);

 private:
  bool fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  bool need(uint64_t n) {
    if (data_.size() - pos_ < n)
      return fail("truncated pickle: %s needs %" PRIu64 " more bytes at offset %zu",
                  describe_op(op_).c_str(), n, pos_);
    return true;
  }
  uint64_t read_le(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  bool new_node(Kind kind, uint32_t* index) {
    if (nodes_.size() >= limits_.max_nodes)
      return fail("pickle has more than %u values (limit)", limits_.max_nodes);
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    *index = static_cast<uint32_t>(nodes_.size() - 1);
    return true;
  }
  bool push_new(Kind kind, uint32_t* index = nullptr) {
    uint32_t i = 0;
    if (!new_node(kind, &i)) return false;
    stack_.push_back(i);
    if (index) *index = i;
    return true;
  }
  // None, True and False are never modified (only containers are): one node each, shared, so a
  // 1-byte opcode costs a stack slot, not a node.
  bool push_shared(uint32_t* shared, Kind kind, bool boolean) {
    if (*shared == kNoNode) {
      if (!new_node(kind, shared)) return false;
      nodes_[*shared].boolean = boolean;
    }
    stack_.push_back(*shared);
    return true;
  }
  bool push_int_signed(int64_t v) {
    uint32_t i = 0;
    if (!push_new(Kind::Int, &i)) return false;
    nodes_[i].bits = static_cast<uint64_t>(v);
    return true;
  }
  bool push_string(Kind kind, uint64_t len) {
    if (!need(len)) return false;
    uint32_t i = 0;
    if (!push_new(kind, &i)) return false;
    nodes_[i].str_off = pos_;
    nodes_[i].str_len = len;
    pos_ += len;
    return true;
  }
  bool push_long(uint64_t n);
  bool pop_mark(size_t* begin) {
    if (marks_.empty()) return fail("%s at offset %zu without a MARK", describe_op(op_).c_str(), op_pos_);
    *begin = marks_.back();
    marks_.pop_back();
    if (*begin > stack_.size()) return fail("corrupt MARK at offset %zu", op_pos_);
    return true;
  }
  bool need_stack(size_t n) {
    // Items above the innermost MARK are the only ones an opcode may consume.
    size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n)
      return fail("%s at offset %zu: stack underflow", describe_op(op_).c_str(), op_pos_);
    return true;
  }
  bool container_top(size_t depth_from_top, Kind want1, Kind want2, uint32_t* index) {
    uint32_t c = stack_[stack_.size() - 1 - depth_from_top];
    Kind k = nodes_[c].kind;
    if (k != want1 && k != want2)
      return fail("%s at offset %zu: target is a %s, not a %s", describe_op(op_).c_str(), op_pos_,
                  kind_name(k), kind_name(want1));
    *index = c;
    return true;
  }
  bool collect(Kind kind) {  // LIST, TUPLE, DICT, FROZENSET: items since the MARK
    size_t begin = 0;
    if (!pop_mark(&begin)) return false;
    if (kind == Kind::Dict && (stack_.size() - begin) % 2 != 0)
      return fail("DICT at offset %zu: odd number of items", op_pos_);
    uint32_t i = 0;
    if (!new_node(kind, &i)) return false;
    nodes_[i].items.assign(stack_.begin() + begin, stack_.end());
    stack_.resize(begin);
    stack_.push_back(i);
    return true;
  }
  bool tuple_n(size_t n) {
    if (!need_stack(n)) return false;
    uint32_t i = 0;
    if (!new_node(Kind::Tuple, &i)) return false;
    nodes_[i].items.assign(stack_.end() - n, stack_.end());
    stack_.resize(stack_.size() - n);
    stack_.push_back(i);
    return true;
  }
  bool memo_put(uint64_t key) {
    if (stack_.empty()) return fail("%s at offset %zu: empty stack", describe_op(op_).c_str(), op_pos_);
    memo_[key] = stack_.back();
    return true;
  }
  bool memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end())
      return fail("%s at offset %zu: memo key %" PRIu64 " is not defined", describe_op(op_).c_str(),
                  op_pos_, key);
    stack_.push_back(it->second);
    return true;
  }

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
  std::string error_;
};

bool Parser::fail(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  error_ = buf;
  return false;
}

// LONG1 / LONG4: n bytes, little-endian two's complement.
bool Parser::push_long(uint64_t n) {
  if (!need(n)) return false;
  uint32_t i = 0;
  if (!push_new(Kind::Int, &i)) return false;
  Node& node = nodes_[i];
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data_.data()) + pos_;
  pos_ += n;
  if (n == 0) return true;  // LONG1 0 is the integer 0
  const bool negative = (p[n - 1] & 0x80) != 0;
  const uint8_t fill = negative ? 0xff : 0x00;
  uint64_t low = 0;
  for (uint64_t b = 0; b < n && b < 8; ++b) low |= static_cast<uint64_t>(p[b]) << (8 * b);
  if (n < 8) {  // sign-extend
    if (negative) low |= ~0ull << (8 * n);
    node.bits = low;
    return true;
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
  return true;
}

bool Parser::run(uint32_t* root, std::string* error) {
  bool ok = true;
  bool stopped = false;
  while (ok && !stopped) {
    if (pos_ >= data_.size()) {
      ok = fail("truncated pickle: no STOP opcode before the end (offset %zu)", pos_);
      break;
    }
    op_pos_ = pos_;
    op_ = static_cast<uint8_t>(data_[pos_++]);
    const OpInfo& info = op_info(op_);
    if (info.role == Role::Forbidden) {
      ok = fail("forbidden pickle opcode %s at offset %zu: it can run code; only plain data "
                "(dict, list, tuple, str, bytes, int, float, bool, None) is accepted",
                describe_op(op_).c_str(), op_pos_);
      break;
    }
    if (info.role == Role::TextProtocol) {
      ok = fail("unsupported pickle opcode %s at offset %zu: text protocols 0 and 1 are not read, "
                "only protocols 2 to 5", describe_op(op_).c_str(), op_pos_);
      break;
    }
    if (info.role == Role::Unknown) {
      ok = fail("invalid pickle opcode 0x%02x at offset %zu", op_, op_pos_);
      break;
    }
    switch (op_) {
      case 0x80: {  // PROTO
        if (!(ok = need(1))) break;
        unsigned proto = static_cast<uint8_t>(data_[pos_++]);
        if (proto < 2 || proto > 5) ok = fail("unsupported pickle protocol %u (2 to 5 are read)", proto);
        break;
      }
      case 0x95:  // FRAME: an 8-byte length; frames are only a buffering hint, read straight through
        if (!(ok = need(8))) break;
        {
          uint64_t len = read_le(8);
          if (len > data_.size() - pos_)
            ok = fail("truncated pickle: FRAME at offset %zu announces %" PRIu64 " bytes, %zu remain", op_pos_, len,
                      data_.size() - pos_);
        }
        break;
      case 0x2e:  // STOP
        if (stack_.empty()) { ok = fail("STOP at offset %zu with an empty stack", op_pos_); break; }
        *root = stack_.back();
        stopped = true;
        break;
      case 0x28:  // MARK
        if (marks_.size() >= limits_.max_mark_depth) {
          ok = fail("MARK at offset %zu: nesting deeper than %u", op_pos_, limits_.max_mark_depth);
          break;
        }
        marks_.push_back(stack_.size());
        break;
      case 0x30:  // POP
        if (!marks_.empty() && marks_.back() == stack_.size()) { marks_.pop_back(); break; }  // pops a mark
        if ((ok = need_stack(1))) stack_.pop_back();
        break;
      case 0x31: {  // POP_MARK
        size_t begin = 0;
        if ((ok = pop_mark(&begin))) stack_.resize(begin);
        break;
      }
      case 0x32:  // DUP
        if ((ok = need_stack(1))) stack_.push_back(stack_.back());
        break;
      case 0x4e: ok = push_shared(&none_, Kind::None, false); break;
      case 0x88: ok = push_shared(&true_, Kind::Bool, true); break;    // NEWTRUE
      case 0x89: ok = push_shared(&false_, Kind::Bool, false); break;  // NEWFALSE
      case 0x4a:  // BININT: signed 32-bit
        if ((ok = need(4))) ok = push_int_signed(static_cast<int32_t>(static_cast<uint32_t>(read_le(4))));
        break;
      case 0x4b:  // BININT1
        if ((ok = need(1))) ok = push_int_signed(static_cast<int64_t>(read_le(1)));
        break;
      case 0x4d:  // BININT2
        if ((ok = need(2))) ok = push_int_signed(static_cast<int64_t>(read_le(2)));
        break;
      case 0x8a:  // LONG1
        if ((ok = need(1))) ok = push_long(read_le(1));
        break;
      case 0x8b: {  // LONG4: signed 32-bit length
        if (!(ok = need(4))) break;
        int32_t n = static_cast<int32_t>(static_cast<uint32_t>(read_le(4)));
        ok = n < 0 ? fail("LONG4 at offset %zu: negative length", op_pos_) : push_long(static_cast<uint64_t>(n));
        break;
      }
      case 0x47: {  // BINFLOAT: big-endian IEEE double
        if (!(ok = need(8))) break;
        uint64_t v = 0;
        for (int b = 0; b < 8; ++b) v = (v << 8) | static_cast<uint8_t>(data_[pos_ + b]);
        pos_ += 8;
        uint32_t i = 0;
        if ((ok = push_new(Kind::Float, &i))) memcpy(&nodes_[i].real, &v, sizeof v);
        break;
      }
      case 0x55:  // SHORT_BINSTRING (a Python 2 str, read as text)
      case 0x8c:  // SHORT_BINUNICODE
        if ((ok = need(1))) ok = push_string(Kind::Str, read_le(1));
        break;
      case 0x54: {  // BINSTRING: signed 32-bit length
        if (!(ok = need(4))) break;
        int32_t n = static_cast<int32_t>(static_cast<uint32_t>(read_le(4)));
        ok = n < 0 ? fail("BINSTRING at offset %zu: negative length", op_pos_) : push_string(Kind::Str, n);
        break;
      }
      case 0x58:  // BINUNICODE
        if ((ok = need(4))) ok = push_string(Kind::Str, read_le(4));
        break;
      case 0x8d:  // BINUNICODE8
        if ((ok = need(8))) ok = push_string(Kind::Str, read_le(8));
        break;
      case 0x43:  // SHORT_BINBYTES
        if ((ok = need(1))) ok = push_string(Kind::Bytes, read_le(1));
        break;
      case 0x42:  // BINBYTES
        if ((ok = need(4))) ok = push_string(Kind::Bytes, read_le(4));
        break;
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        if ((ok = need(8))) ok = push_string(Kind::Bytes, read_le(8));
        break;
      case 0x29: ok = push_new(Kind::Tuple); break;   // EMPTY_TUPLE
      case 0x5d: ok = push_new(Kind::List); break;    // EMPTY_LIST
      case 0x8f: ok = push_new(Kind::List); break;    // EMPTY_SET, represented as a list
      case 0x7d: ok = push_new(Kind::Dict); break;    // EMPTY_DICT
      case 0x85: ok = tuple_n(1); break;
      case 0x86: ok = tuple_n(2); break;
      case 0x87: ok = tuple_n(3); break;
      case 0x74: ok = collect(Kind::Tuple); break;    // TUPLE
      case 0x6c: ok = collect(Kind::List); break;     // LIST
      case 0x91: ok = collect(Kind::List); break;     // FROZENSET, represented as a list
      case 0x64: ok = collect(Kind::Dict); break;     // DICT
      case 0x61: {  // APPEND: list, value
        uint32_t c = 0;
        if (!(ok = need_stack(2))) break;
        if (!(ok = container_top(1, Kind::List, Kind::List, &c))) break;
        nodes_[c].items.push_back(stack_.back());
        stack_.pop_back();
        break;
      }
      case 0x65:    // APPENDS: list, MARK, values...
      case 0x90: {  // ADDITEMS: set, MARK, values...
        size_t begin = 0;
        if (!(ok = pop_mark(&begin))) break;
        if (begin == 0) { ok = fail("%s at offset %zu: no target below the MARK", describe_op(op_).c_str(), op_pos_); break; }
        uint32_t c = stack_[begin - 1];
        if (nodes_[c].kind != Kind::List) {
          ok = fail("%s at offset %zu: target is a %s, not a list", describe_op(op_).c_str(), op_pos_,
                    kind_name(nodes_[c].kind));
          break;
        }
        nodes_[c].items.insert(nodes_[c].items.end(), stack_.begin() + begin, stack_.end());
        stack_.resize(begin);
        break;
      }
      case 0x73: {  // SETITEM: dict, key, value
        uint32_t c = 0;
        if (!(ok = need_stack(3))) break;
        if (!(ok = container_top(2, Kind::Dict, Kind::Dict, &c))) break;
        nodes_[c].items.push_back(stack_[stack_.size() - 2]);
        nodes_[c].items.push_back(stack_.back());
        stack_.resize(stack_.size() - 2);
        break;
      }
      case 0x75: {  // SETITEMS: dict, MARK, key, value, ...
        size_t begin = 0;
        if (!(ok = pop_mark(&begin))) break;
        if (begin == 0) { ok = fail("SETITEMS at offset %zu: no target below the MARK", op_pos_); break; }
        uint32_t c = stack_[begin - 1];
        if (nodes_[c].kind != Kind::Dict) {
          ok = fail("SETITEMS at offset %zu: target is a %s, not a dict", op_pos_, kind_name(nodes_[c].kind));
          break;
        }
        if ((stack_.size() - begin) % 2 != 0) { ok = fail("SETITEMS at offset %zu: odd number of items", op_pos_); break; }
        nodes_[c].items.insert(nodes_[c].items.end(), stack_.begin() + begin, stack_.end());
        stack_.resize(begin);
        break;
      }
      case 0x94: ok = memo_put(memo_.size()); break;  // MEMOIZE
      case 0x71:  // BINPUT
        if ((ok = need(1))) ok = memo_put(read_le(1));
        break;
      case 0x72:  // LONG_BINPUT
        if ((ok = need(4))) ok = memo_put(read_le(4));
        break;
      case 0x68:  // BINGET
        if ((ok = need(1))) ok = memo_get(read_le(1));
        break;
      case 0x6a:  // LONG_BINGET
        if ((ok = need(4))) ok = memo_get(read_le(4));
        break;
      default:
        ok = fail("pickle opcode %s at offset %zu is not handled", describe_op(op_).c_str(), op_pos_);
        break;
    }
  }
  if (!ok) *error = error_;
  return ok;
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

bool parse(std::string data, Document* doc, std::string* error, const Limits& limits) {
  if (data.size() > limits.max_input_bytes) {
    *error = "pickle is larger than the limit of " + std::to_string(limits.max_input_bytes) + " bytes";
    return false;
  }
  doc->data_ = std::move(data);
  doc->nodes_.clear();
  doc->wide_dict_index_.clear();
  doc->root_ = kNoNode;
  Parser parser(doc->data_, &doc->nodes_, limits);
  uint32_t root = kNoNode;
  if (!parser.run(&root, error)) {
    doc->nodes_.clear();
    doc->nodes_.shrink_to_fit();
    return false;
  }
  doc->root_ = root;
  doc->index_wide_dicts();
  return true;
}

bool parse_file(const std::string& path, Document* doc, std::string* error, const Limits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = std::string("cannot open: ") + strerror(errno);
    return false;
  }
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) {
    *error = "cannot read the file size";
    return false;
  }
  if (static_cast<uint64_t>(size) > limits.max_input_bytes) {
    *error = "file is larger than the limit of " + std::to_string(limits.max_input_bytes) + " bytes";
    return false;
  }
  std::string data(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(&data[0], size)) {
    *error = std::string("read error: ") + strerror(errno);
    return false;
  }
  return parse(std::move(data), doc, error, limits);
}

bool looks_like_pickle_bytes(std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x80 && static_cast<uint8_t>(head[1]) >= 2 &&
         static_cast<uint8_t>(head[1]) <= 5;
}

}  // namespace gpumemtrace::pickle
