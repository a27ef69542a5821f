// report/import/pickle_reader.h — a restricted, bounded reader for Python pickles (protocols 2 to 5)
// that accepts plain data only.
//
// Why restricted: a pickle is a program for a stack machine, and the opcodes that name a callable
// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4)
// are how `pickle.load` ends up running arbitrary code. PyTorch's `_dump_snapshot` writes nothing but
// dicts, lists, tuples, str, int, float, bool and None, so this reader implements exactly the opcodes
// that build those values (plus bytes, sets as lists, the memo and framing) and rejects every other one
// with an error naming the opcode and its byte offset. It never calls back into anything.
//
// Bounds (never crash or hang on any input):
//  - one pass over the input, O(1) amortized work per opcode: no recursion, no backtracking;
//  - every value is a node in one arena, containers hold node indices, the memo holds node indices, so
//    memory is O(input size) even for cyclic or heavily shared data (a list that contains itself is a
//    legal pickle and is represented, not expanded);
//  - limits on the input size, the node count and the MARK nesting depth (Limits below); None, True
//    and False are one shared node each, so a run of 1-byte opcodes cannot fill the arena;
//  - strings are not copied: they are (offset, length) views into the document's own copy of the input;
//  - get() on a dict is O(1): dicts wider than kIndexedDictItems keys are indexed by a hash table built
//    once after parsing (O(input size) entries), so a wide dict looked up many times (through shared
//    references) costs no more than a narrow one.
// Consumers walk the result with explicit depth bounds (see dump()). The memo makes the value graph a
// DAG (or a cyclic graph): a consumer that follows references must count what it visits and stop at
// a limit of its own (snapshot_to_trace.cpp does), since a few KB can reference 10^9 items.
//
// Thread-safety: a Document is immutable after parse() and may be read from any number of threads.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpumemtrace::pickle {

enum class Kind : uint8_t { None, Bool, Int, Float, Str, Bytes, List, Tuple, Dict };

// A pickle that cannot be read. what() is one line such as "forbidden pickle opcode GLOBAL (0x63 'c')
// at offset 2: ..." (no file name: the caller adds it); offset() is the byte offset of the opcode at
// fault, kNoOffset where the input as a whole is (cannot be opened, too large).
class ParseError : public std::runtime_error {
 public:
  static constexpr uint64_t kNoOffset = UINT64_MAX;
  explicit ParseError(const std::string& message, uint64_t offset = kNoOffset)
      : std::runtime_error(message), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

const char* kind_name(Kind kind);

// How an Int node's value is held (Python ints are unbounded; snapshots only need 64 bits).
enum class IntRange : uint8_t {
  Signed64,    // `bits` is an int64_t value, two's complement
  Unsigned64,  // value in (INT64_MAX, UINT64_MAX], `bits` is the value
  TooLarge,    // does not fit in 64 bits; `bits` is meaningless
};

struct Node {
  Kind kind = Kind::None;
  IntRange int_range = IntRange::Signed64;
  bool boolean = false;
  uint64_t bits = 0;      // Int
  double real = 0.0;      // Float
  uint64_t str_off = 0;   // Str / Bytes: view into Document::data()
  uint64_t str_len = 0;
  std::vector<uint32_t> items;  // List/Tuple: elements; Dict: key0, value0, key1, value1, ...
};

struct Limits {
  uint64_t max_input_bytes = 64ull << 30;  // 64 GiB: PyTorch snapshots reach several GB
  // Each node is a Node (about 64 bytes), and an opcode as short as one byte (EMPTY_LIST) makes one;
  // None/True/False share one node each. 2^27 nodes bound the arena at about 8 GiB;
  // a history of 500k entries with 40-frame stacks needs about 85M (some 170 per entry).
  uint32_t max_nodes = 1u << 27;
  uint32_t max_mark_depth = 4096;          // nested MARKs still open at the same time
};

inline constexpr uint32_t kNoNode = UINT32_MAX;
// Dicts with more key/value pairs than this are indexed (Document::get); smaller ones are scanned,
// which is faster for the 5 to 12 keys of a snapshot's dicts.
inline constexpr size_t kIndexedDictItems = 16;

class Document {
 public:
  uint32_t root() const { return root_; }
  const Node& node(uint32_t index) const { return nodes_[index]; }
  size_t node_count() const { return nodes_.size(); }
  const std::string& data() const { return data_; }

  // Accessors that never fail: a wrong kind or a missing key gives the fallback / kNoNode.
  bool is(uint32_t index, Kind kind) const { return index < nodes_.size() && nodes_[index].kind == kind; }
  std::string_view str(uint32_t index) const;                    // Str or Bytes, else ""
  uint32_t get(uint32_t dict, std::string_view key) const;       // value of a Str key, last wins; O(1)
  bool as_u64(uint32_t index, uint64_t* out) const;              // non-negative Int or Bool
  bool as_i64(uint32_t index, int64_t* out) const;               // Int that fits int64, or Bool
  bool as_double(uint32_t index, double* out) const;             // Float or Int
  const std::vector<uint32_t>& items(uint32_t index) const;      // List/Tuple/Dict items, else {}

  // A Python-like rendering for tests and error messages; containers deeper than max_depth and
  // output past max_chars are elided with "...".
  std::string dump(uint32_t index, int max_depth = 16, size_t max_chars = 1 << 20) const;

 private:
  friend void parse(std::string data, Document* doc, const Limits& limits);
  void index_wide_dicts();

  // A Str key of an indexed dict: the dict's node and the key's bytes (a view into data_).
  struct DictKey {
    uint32_t dict;
    std::string_view key;
    bool operator==(const DictKey& other) const { return dict == other.dict && key == other.key; }
  };
  struct DictKeyHash {
    size_t operator()(const DictKey& k) const {
      return std::hash<std::string_view>()(k.key) ^ (static_cast<size_t>(k.dict) * 0x9e3779b97f4a7c15ull);
    }
  };

  std::string data_;
  std::vector<Node> nodes_;
  uint32_t root_ = kNoNode;
  std::unordered_map<DictKey, uint32_t, DictKeyHash> wide_dict_index_;  // -> the value node, last key wins
};

// Parses `data` (takes ownership) into *doc. Throws ParseError (then *doc holds no value).
void parse(std::string data, Document* doc, const Limits& limits = Limits());

// Reads the file, then parse(). Throws ParseError; its message names the file only through the caller.
void parse_file(const std::string& path, Document* doc, const Limits& limits = Limits());

// True when the bytes start like a binary pickle: PROTO (0x80) followed by a protocol 2..5.
bool looks_like_pickle_bytes(std::string_view head);

}  // namespace gpumemtrace::pickle
