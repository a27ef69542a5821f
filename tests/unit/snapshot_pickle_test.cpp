// tests/unit/snapshot_pickle_test.cpp — the restricted pickle reader (report/import/pickle_reader.h):
// plain data accepted in every binary protocol form, everything that can run code rejected with the
// opcode and offset named, malformed input rejected without crashing.
#include <gtest/gtest.h>

#include <string>

#include "report/import/pickle_reader.h"

using gpumemtrace::pickle::Document;
using gpumemtrace::pickle::IntRange;
using gpumemtrace::pickle::Kind;
using gpumemtrace::pickle::Limits;
using gpumemtrace::pickle::parse;
using gpumemtrace::pickle::ParseError;

namespace {

std::string B(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

std::string parse_dump(const std::string& bytes) {
  Document doc;
  try {
    parse(bytes, &doc);
  } catch (const ParseError& e) {
    return std::string("<error> ") + e.what();
  }
  return doc.dump(doc.root());
}

// The message of the ParseError that parsing `bytes` throws ("" when it does not throw: a failure).
std::string parse_error(const std::string& bytes, const Limits& limits = Limits(), uint64_t* offset = nullptr) {
  Document doc;
  try {
    parse(bytes, &doc, limits);
  } catch (const ParseError& e) {
    if (offset) *offset = e.offset();
    return e.what();
  }
  ADD_FAILURE() << "no ParseError";
  return "";
}

}  // namespace

// pickle.dumps({'a': 1, 'b': [True, None, 2.5]}, protocol=2)
TEST(SnapshotPickle, Protocol2Dict) {
  std::string p = B({0x80, 0x02, '}', 'q', 0, '(', 'X', 1, 0, 0, 0, 'a', 'q', 1, 'K', 1, 'X', 1, 0, 0, 0, 'b', 'q', 2,
                     ']', 'q', 3, '(', 0x88, 'N', 'G', 0x40, 0x04, 0, 0, 0, 0, 0, 0, 'e', 'u', '.'});
  EXPECT_EQ(parse_dump(p), "{'a': 1, 'b': [True, None, 2.5]}");
  Document doc;
  ASSERT_NO_THROW(parse(p, &doc));
  uint64_t v = 0;
  EXPECT_TRUE(doc.as_u64(doc.get(doc.root(), "a"), &v));
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(doc.get(doc.root(), "missing"), gpumemtrace::pickle::kNoNode);
  EXPECT_EQ(doc.items(doc.get(doc.root(), "b")).size(), 3u);
}

// Protocol 4 framing, SHORT_BINUNICODE, MEMOIZE, BINGET, TUPLE2, BININT2, BINBYTES.
TEST(SnapshotPickle, Protocol4FrameMemoTuple) {
  std::string body = B({0x8c, 3, 'k', 'e', 'y', 0x94, 'M', 0x34, 0x12, 'h', 0, 0x87, 0x94, 'C', 2, 'h', 'i', 0x86, 0x94, '.'});
  std::string p = B({0x80, 0x04, 0x95}) + B({static_cast<int>(body.size()), 0, 0, 0, 0, 0, 0, 0}) + body;
  EXPECT_EQ(parse_dump(p), "(('key', 4660, 'key'), b'hi')");
}

TEST(SnapshotPickle, Integers) {
  // LONG1 of 2**63 (9 bytes), -1, 2**64 (too large), BININT -2, LONG1 0 bytes = 0
  std::string p = B({0x80, 0x02, '(', 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0x8a, 1, 0xff, 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                     'J', 0xfe, 0xff, 0xff, 0xff, 0x8a, 0, 'l', '.'});
  Document doc;
  ASSERT_NO_THROW(parse(p, &doc));
  const auto& it = doc.items(doc.root());
  ASSERT_EQ(it.size(), 5u);
  uint64_t u = 0;
  int64_t s = 0;
  EXPECT_TRUE(doc.as_u64(it[0], &u));
  EXPECT_EQ(u, 1ull << 63);
  EXPECT_FALSE(doc.as_i64(it[0], &s));
  EXPECT_TRUE(doc.as_i64(it[1], &s));
  EXPECT_EQ(s, -1);
  EXPECT_FALSE(doc.as_u64(it[1], &u));
  EXPECT_EQ(doc.node(it[2]).int_range, IntRange::TooLarge);
  EXPECT_FALSE(doc.as_u64(it[2], &u));
  EXPECT_TRUE(doc.as_i64(it[3], &s));
  EXPECT_EQ(s, -2);
  EXPECT_TRUE(doc.as_i64(it[4], &s));
  EXPECT_EQ(s, 0);
}

// A memoized list mutated after it was memoized is seen mutated through BINGET (reference semantics).
TEST(SnapshotPickle, MemoSharesMutableContainers) {
  std::string p = B({0x80, 0x02, ']', 'q', 0, 'h', 0, 'K', 7, 'a', 0x86, '.'});
  EXPECT_EQ(parse_dump(p), "([7], [7])");
}

// A list that contains itself is legal pickle; it is represented, and walking it is bounded.
TEST(SnapshotPickle, CycleIsBounded) {
  std::string p = B({0x80, 0x02, ']', 'q', 0, 'h', 0, 'a', '.'});
  Document doc;
  ASSERT_NO_THROW(parse(p, &doc));
  std::string d = doc.dump(doc.root(), 4);
  EXPECT_EQ(d, "[[[[[...]]]]]");
}

TEST(SnapshotPickle, ForbiddenOpcodesAreNamedWithOffset) {
  // pickle.dumps(os.system-like reduce, protocol=2): GLOBAL first
  std::string global = B({0x80, 0x02, 'c', 'p', 'o', 's', 'i', 'x', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', 'q', 0,
                          'X', 2, 0, 0, 0, 'i', 'd', 0x85, 'R', '.'});
  std::string err = parse_error(global);
  EXPECT_NE(err.find("GLOBAL"), std::string::npos) << err;
  EXPECT_NE(err.find("offset 2"), std::string::npos) << err;
  EXPECT_NE(err.find("forbidden"), std::string::npos) << err;

  std::string stack_global = B({0x80, 0x04, 0x8c, 2, 'o', 's', 0x8c, 6, 's', 'y', 's', 't', 'e', 'm', 0x93, '.'});
  err = parse_error(stack_global);
  EXPECT_NE(err.find("STACK_GLOBAL"), std::string::npos) << err;
  EXPECT_NE(err.find("offset 14"), std::string::npos) << err;

  err = parse_error(B({0x80, 0x02, 'N', ')', 'R', '.'}));
  EXPECT_NE(err.find("REDUCE"), std::string::npos) << err;
  EXPECT_NE(err.find("offset 4"), std::string::npos) << err;

  for (int op : {int('b'), int('i'), int('o'), int('P'), int('Q'), 0x81, 0x82, 0x83, 0x84, 0x92, 0x97, 0x98}) {
    err = parse_error(B({0x80, 0x02, ']', op, '.'}));
    EXPECT_NE(err.find("forbidden pickle opcode"), std::string::npos) << op << ": " << err;
  }
}

TEST(SnapshotPickle, MalformedInputIsAnError) {
  EXPECT_NE(parse_error("").find("truncated"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, ']'})).find("no STOP"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x06, 'N', '.'})).find("protocol 6"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, 'X', 0xff, 0xff, 0xff, 0x7f, 'a'})).find("truncated"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, '.'})).find("empty stack"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, 'h', 5, '.'})).find("memo key 5"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, 'e', '.'})).find("without a MARK"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, 'N', 'K', 1, 'a', '.'})).find("not a list"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, '(', 'N', 'd', '.'})).find("odd number"), std::string::npos);
  uint64_t offset = 0;
  EXPECT_NE(parse_error(B({0x80, 0x02, 0xff}), Limits(), &offset).find("invalid pickle opcode 0xff at offset 2"),
            std::string::npos);
  EXPECT_EQ(offset, 2u);
  EXPECT_NE(parse_error(B({'I', '1', '\n', '.'})).find("text protocols"), std::string::npos);
  EXPECT_NE(parse_error(B({0x80, 0x02, '(', 0x86, '.'})).find("underflow"), std::string::npos);
}

TEST(SnapshotPickle, MarkDepthLimit) {
  std::string p = B({0x80, 0x02});
  p += std::string(100, '(');
  Limits limits;
  limits.max_mark_depth = 50;
  uint64_t offset = 0;
  std::string err = parse_error(p, limits, &offset);
  EXPECT_NE(err.find("nesting deeper than 50"), std::string::npos) << err;
  EXPECT_EQ(offset, 2u + 50u);  // the 51st MARK
}

TEST(SnapshotPickle, NodeAndSizeLimits) {
  Limits limits;
  limits.max_nodes = 3;
  // Ints, not None: None/True/False share one node each (below).
  std::string err = parse_error(B({0x80, 0x02, '(', 'K', 1, 'K', 2, 'K', 3, 'K', 4, 'l', '.'}), limits);
  EXPECT_NE(err.find("more than 3 values"), std::string::npos) << err;
  limits = Limits();
  limits.max_input_bytes = 4;
  uint64_t offset = 0;
  err = parse_error(B({0x80, 0x02, 'N', 'N', '0', '.'}), limits, &offset);
  EXPECT_NE(err.find("larger than the limit"), std::string::npos) << err;
  EXPECT_EQ(offset, ParseError::kNoOffset);  // the input as a whole
}

TEST(SnapshotPickle, LooksLikePickle) {
  EXPECT_TRUE(gpumemtrace::pickle::looks_like_pickle_bytes(B({0x80, 0x04})));
  EXPECT_FALSE(gpumemtrace::pickle::looks_like_pickle_bytes("{\"type\":\"header\"}"));
  EXPECT_FALSE(gpumemtrace::pickle::looks_like_pickle_bytes(B({0x80})));
}

// A pickle of many None/True/False (1-byte opcodes) costs one node each kind, not one per opcode: it
// parses under a node limit far below the opcode count.
TEST(SnapshotPickle, NoneTrueFalseShareOneNodeEach) {
  std::vector<uint8_t> bytes = {0x80, 0x02, '('};
  for (int i = 0; i < 1000; ++i) {
    bytes.push_back('N');
    bytes.push_back(0x88);
    bytes.push_back(0x89);
  }
  bytes.push_back('l');
  bytes.push_back('.');
  Limits limits;
  limits.max_nodes = 4;  // None, True, False and the list
  Document doc;
  ASSERT_NO_THROW(parse(std::string(bytes.begin(), bytes.end()), &doc, limits));
  EXPECT_EQ(doc.node_count(), 4u);
  const auto& items = doc.items(doc.root());
  ASSERT_EQ(items.size(), 3000u);
  EXPECT_TRUE(doc.is(items[0], gpumemtrace::pickle::Kind::None));
  uint64_t v = 9;
  EXPECT_TRUE(doc.as_u64(items[1], &v));
  EXPECT_EQ(v, 1u);
  EXPECT_TRUE(doc.as_u64(items[2], &v));
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(items[3], items[0]);
}

// A dict wider than kIndexedDictItems is looked up through the hash index: same answers as a scan
// (the last of duplicate keys wins, non-str keys are never matched, a missing key is kNoNode).
TEST(SnapshotPickle, WideDictLookupIsIndexedLastKeyWins) {
  std::string bytes = B({0x80, 0x04, '}', '('});
  auto short_str = [&](const std::string& s) {
    bytes += static_cast<char>(0x8c);
    bytes += static_cast<char>(s.size());
    bytes += s;
  };
  for (int i = 0; i < 100; ++i) {
    short_str("k" + std::to_string(i));
    bytes += B({'K', i});  // BININT1 i
  }
  short_str("k7");
  bytes += B({'K', 200});        // a duplicate key: this value wins
  bytes += B({'K', 5, 'K', 9});  // an int key 5 -> 9: not a str key
  bytes += B({'u', '.'});
  Document doc;
  ASSERT_NO_THROW(parse(bytes, &doc));
  ASSERT_GT(doc.items(doc.root()).size(), 2 * gpumemtrace::pickle::kIndexedDictItems);
  uint64_t v = 0;
  ASSERT_TRUE(doc.as_u64(doc.get(doc.root(), "k42"), &v));
  EXPECT_EQ(v, 42u);
  ASSERT_TRUE(doc.as_u64(doc.get(doc.root(), "k7"), &v));
  EXPECT_EQ(v, 200u);
  EXPECT_EQ(doc.get(doc.root(), "k100"), gpumemtrace::pickle::kNoNode);
  EXPECT_EQ(doc.get(doc.root(), "5"), gpumemtrace::pickle::kNoNode);
}
