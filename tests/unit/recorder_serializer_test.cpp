// tests/unit/recorder_serializer_test.cpp — the writer's output: every line is valid JSON with the
// documented fields, stacks, frames and sites are written once and referred to by id, event lines
// are delta-coded (version 2), Python frames are tagged, strings are escaped.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "trace/json_line.h"
#include "interpose/writer/serializer.h"
#include "trace/format.h"

namespace gpumemtrace {
namespace {

using nlohmann::json;

std::vector<json> parse_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));  // throws on invalid JSON
  return out;
}

// The lines with every version 2 event line expanded to its version 1 form (the site's fields
// merged in, time and seq undone from their deltas, the short keys renamed), site lines dropped:
// what the tests below check, and what the format promises the two forms mean.
std::vector<std::string> text_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<json> expand_events(const std::string& text) {
  std::map<uint64_t, json> sites;
  std::vector<json> out;
  uint64_t seq = 0, t = 0;
  for (const std::string& line : text_lines(text)) {
    const json l = json::parse(line);
    if (l.contains("type") && l["type"] == "site") {
      EXPECT_EQ(l["id"].get<uint64_t>(), sites.size() + 1) << "site ids count 1, 2, 3...";
      sites[l["id"].get<uint64_t>()] = l;
      continue;
    }
    if (l.contains("type")) {
      out.push_back(l);
      continue;
    }
    EXPECT_EQ(line.rfind("{\"e\":", 0), 0u) << "an event line starts with its site: " << line;
    EXPECT_TRUE(sites.count(l["e"].get<uint64_t>())) << "site used before defined: " << l.dump();
    json e = sites[l["e"].get<uint64_t>()];
    e.erase("id");
    e["type"] = "event";
    seq = l.contains("q") ? l["q"].get<uint64_t>() : seq + 1;
    t += static_cast<uint64_t>(l["t"].get<int64_t>());
    e["seq"] = seq;
    e["t"] = t;
    format::Op op{};
    EXPECT_TRUE(format::parse_op(e["op"].get<std::string>(), &op));
    if (format::op_has_addr(op)) e["addr"] = l["a"];
    if (format::op_has_size(op)) e["size"] = l.value("s", uint64_t{0});
    if (l.contains("r")) e["result"] = l["r"];
    for (auto it = l.begin(); it != l.end(); ++it)
      if (it.key().size() > 1) e[it.key()] = it.value();  // the optional fields keep their v1 names
    out.push_back(e);
  }
  return out;
}

__attribute__((noinline)) uintptr_t here() { return reinterpret_cast<uintptr_t>(__builtin_return_address(0)); }

EventRecord make_event(uint64_t seq, format::Op op, uint64_t addr, uint64_t size, std::vector<uintptr_t> stack) {
  EventRecord r{};
  r.seq = seq;
  r.time_ns = 1000 + seq;
  r.tid = 77;
  r.op = op;
  r.kind = format::Kind::Device;
  r.api = "cudaMalloc";
  r.addr = addr;
  r.size = size;
  r.device = 0;
  r.flags = kHasResult;
  r.native_depth = static_cast<int16_t>(stack.size());
  for (size_t i = 0; i < stack.size(); ++i) r.native[i] = stack[i];
  return r;
}

TEST(JsonLine, EscapesAndKeepsUtf8Valid) {
  std::string out;
  JsonLine::append_string(&out, "a\"b\\c\n\x01 \xC3\xA9 \xFF");
  json parsed = json::parse(out);
  EXPECT_EQ(parsed.get<std::string>(), "a\"b\\c\n\x01 \xC3\xA9 \xEF\xBF\xBD");
}

TEST(JsonLine, RejectsWhatStrictReadersReject) {
  // Surrogates, code points above U+10FFFF and overlong forms become U+FFFD; valid 4-byte text stays.
  for (const char* bad : {"\xED\xA0\x80", "\xF4\x90\x80\x80", "\xC0\xAF", "\xE0\x80\xAF"}) {
    std::string out;
    JsonLine::append_string(&out, bad);
    EXPECT_EQ(out.find(bad), std::string::npos) << out;
    EXPECT_NE(out.find("\xEF\xBF\xBD"), std::string::npos) << out;
  }
  std::string out;
  JsonLine::append_string(&out, "\xF0\x9F\x98\x80");  // U+1F600
  EXPECT_EQ(json::parse(out).get<std::string>(), "\xF0\x9F\x98\x80");
}

TEST(JsonLine, IntegersAtTheEdges) {
  std::string out;
  JsonLine j(&out);
  j.begin("x").num("min", INT64_MIN).num("neg", -1).unum("max", UINT64_MAX).hex("h", 0xdeadbeef).end();
  json parsed = json::parse(out);
  EXPECT_EQ(parsed["min"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(parsed["neg"].get<int64_t>(), -1);
  EXPECT_EQ(parsed["max"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ(parsed["h"], "0xdeadbeef");
}

TEST(Serializer, HeaderEventsStacksFooter) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/true);
  s.header(current_process_header(64, false));
  const uintptr_t ip = here();
  s.event(make_event(1, format::Op::Alloc, 0x7000, 4096, {ip, ip + 1}));
  s.event(make_event(2, format::Op::Alloc, 0x8000, 8192, {ip, ip + 1}));  // same stack: no new lines
  s.event(make_event(3, format::Op::Free, 0x7000, 0, {ip}));               // new stack, known frame
  s.dropped(5, 5);
  s.footer(3, 5, 999);
  auto lines = expand_events(out);

  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0]["type"], "header");
  EXPECT_EQ(lines[0]["format"], "gpumemtrace");
  EXPECT_EQ(lines[0]["version"], 2);
  EXPECT_EQ(lines[0]["pid"], getpid());
  int frames = 0, stacks = 0, events = 0, modules = 0;
  std::map<int, json> frame_by_id;
  for (const json& l : lines) {
    if (l["type"] == "module") ++modules;
    if (l["type"] == "frame") frame_by_id[l["id"]] = l, ++frames;
    if (l["type"] == "stack") {
      ++stacks;
      for (const json& id : l["frames"]) EXPECT_TRUE(frame_by_id.count(id)) << "frame used before defined";
    }
    if (l["type"] == "event") ++events;
  }
  EXPECT_GT(modules, 0);
  EXPECT_EQ(frames, 2);  // ip and ip+1, each written once
  EXPECT_EQ(stacks, 2);
  EXPECT_EQ(events, 3);
  // The frame of `here()`'s caller is this test function, found by the symbolizer.
  const json& f1 = frame_by_id.begin()->second;
  EXPECT_NE(f1["function"].get<std::string>().find("Serializer_HeaderEventsStacksFooter"), std::string::npos)
      << f1.dump();
  EXPECT_NE(f1["file"].get<std::string>().find("recorder_serializer_test.cpp"), std::string::npos);
  EXPECT_GT(f1["line"].get<int>(), 0);

  std::vector<json> evs;
  for (const json& l : lines)
    if (l["type"] == "event") evs.push_back(l);
  EXPECT_EQ(evs[0]["stack"], evs[1]["stack"]);
  EXPECT_NE(evs[0]["stack"], evs[2]["stack"]);
  EXPECT_EQ(evs[0]["addr"], "0x7000");
  EXPECT_EQ(evs[1]["size"], 8192);
  EXPECT_EQ(evs[2]["op"], "free");
  EXPECT_FALSE(evs[0].contains("result"));  // 0, the default: left out
  EXPECT_EQ(evs[2]["seq"], 3);
  EXPECT_EQ(evs[2]["t"], 1003);
  EXPECT_EQ(lines[lines.size() - 2]["type"], "dropped");
  EXPECT_EQ(lines[lines.size() - 2]["count"], 5);
  EXPECT_EQ(lines.back()["type"], "footer");
  EXPECT_EQ(lines.back()["events"], 3);
}

// The footer says how the process ended: "end", with the exit status or the signal; nothing when unknown.
TEST(Serializer, FooterSaysHowTheProcessEnded) {
  auto footer_of = [](const ProcessEnd& end) {
    std::string out;
    TraceSerializer s(&out, /*symbolize=*/false);
    s.footer(1, 0, 999, 0, end);
    return json::parse(out);
  };
  json exited = footer_of(ProcessEnd::exited(format::End::Exit, 3));
  EXPECT_EQ(exited["end"], "exit");
  EXPECT_EQ(exited["exit_status"], 3);
  EXPECT_FALSE(exited.contains("signal"));
  json quick = footer_of(ProcessEnd::exited(format::End::QuickExit, 256 + 7));  // the parent sees 7
  EXPECT_EQ(quick["end"], "_exit");
  EXPECT_EQ(quick["exit_status"], 7);
  json killed = footer_of(ProcessEnd::killed(15));
  EXPECT_EQ(killed["end"], "signal");
  EXPECT_EQ(killed["signal"], 15);
  EXPECT_FALSE(killed.contains("exit_status"));
  json exec = footer_of(ProcessEnd::exec());
  EXPECT_EQ(exec["end"], "exec");
  EXPECT_FALSE(exec.contains("exit_status"));
  json unknown_status = footer_of(ProcessEnd::exited(format::End::Exit, -1));  // exit() not seen
  EXPECT_EQ(unknown_status["end"], "exit");
  EXPECT_FALSE(unknown_status.contains("exit_status"));
  json unknown = footer_of(ProcessEnd{});
  EXPECT_FALSE(unknown.contains("end"));
  EXPECT_EQ(unknown["events"], 1);
}

TEST(Serializer, OptionalFieldsFollowFlags) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  EventRecord r = make_event(1, format::Op::BlockAlloc, 0x7100, 100, {});
  r.kind = format::Kind::Block;
  r.flags = kHasSegment | kHasPoolName;
  r.segment = 0x7000;
  strcpy(r.pool_name, "my \"pool\"");
  s.event(r);
  EventRecord m = make_event(2, format::Op::MemInfo, 0, 0, {});
  m.flags = kHasMemInfo;
  m.free_bytes = 10;
  m.total_bytes = 20;
  s.event(m);
  auto lines = expand_events(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["segment"], "0x7000");
  EXPECT_EQ(lines[0]["pool"], "my \"pool\"");
  EXPECT_EQ(lines[0]["stack"], 0);
  EXPECT_FALSE(lines[0].contains("result"));
  EXPECT_FALSE(lines[1].contains("addr"));
  EXPECT_EQ(lines[1]["free"], 10);
  EXPECT_EQ(lines[1]["total"], 20);
}

// Each slot means one thing: a map's handle is not a block's segment, a block's pool name is not a
// label.
TEST(Serializer, HandleAndSegmentPoolNameAndLabelHaveTheirOwnSlots) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  EventRecord m = make_event(1, format::Op::Map, 0x7e0000000000, 2 << 20, {});
  m.kind = format::Kind::Physical;
  m.flags = kHasHandle | kHasResult;
  m.handle = 0x1010;
  m.segment = 0xdead;  // not flagged: never written
  s.event(m);
  EventRecord b = make_event(2, format::Op::BlockAlloc, 0x7100, 100, {});
  b.kind = format::Kind::Block;
  b.flags = kHasSegment | kHasPoolName;
  b.segment = 0x7000;
  b.handle = 0xbeef;  // not flagged: never written
  strcpy(b.pool_name, "large");
  strcpy(b.label, "not a pool");
  s.event(b);
  auto lines = expand_events(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["handle"], "0x1010");
  EXPECT_FALSE(lines[0].contains("segment"));
  EXPECT_EQ(lines[1]["segment"], "0x7000");
  EXPECT_FALSE(lines[1].contains("handle"));
  EXPECT_EQ(lines[1]["pool"], "large");
  EXPECT_FALSE(lines[1].contains("label"));
}

TEST(Serializer, ScopeEventsCarryTheirNameAndNoRange) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  EventRecord begin = make_event(1, format::Op::ScopeBegin, 0, 0, {});
  begin.kind = format::Kind::None;
  begin.api = "pytest";
  begin.device = -1;
  begin.flags = kHasLabel;
  strcpy(begin.label, "short");
  s.event(begin);
  const std::string long_name = std::string(300, 'x') + "::test_it[\"quoted\"]";
  EventRecord end = begin;
  end.seq = 2;
  end.op = format::Op::ScopeEnd;
  end.flags = kHasLabel | kLabelInterned;
  end.interned_label = long_name.c_str();
  s.event(end);
  auto lines = expand_events(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["op"], "scope_begin");
  EXPECT_EQ(lines[0]["label"], "short");
  EXPECT_EQ(lines[1]["op"], "scope_end");
  EXPECT_EQ(lines[1]["label"], long_name);
  for (const json& line : lines) {
    EXPECT_EQ(line["kind"], "none");
    EXPECT_EQ(line["api"], "pytest");
    EXPECT_FALSE(line.contains("addr"));
    EXPECT_FALSE(line.contains("size"));
  }
}

namespace {

// A cudaFree of 0x7000 at `time_ns`: the event lines around the standalone records below.
EventRecord free_at(uint64_t seq, uint64_t time_ns) {
  EventRecord r{};
  r.seq = seq;
  r.time_ns = time_ns;
  r.api = "cudaFree";
  r.op = format::Op::Free;
  r.addr = 0x7000;
  return r;
}

}  // namespace

// Version 2 event lines: one site per distinct (thread, api, op, kind, device, stack, delayed), the
// time as a signed delta, seq only where it jumps, sizes and results at 0 left out.
// A garbage collection (format::Op::Gc): a standalone "gc" record from its start to its end, which
// leaves the event lines' deltas as they were.
TEST(Serializer, GcRecordSpansItsCollection) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  s.event(free_at(1, 1000));
  EventRecord gc{};
  gc.seq = 2;
  gc.time_ns = 1400;  // when it ended: the moment it was reported
  gc.tid = 9;
  gc.op = format::Op::Gc;
  gc.kind = format::Kind::None;
  gc.flags = kHasBegan;
  gc.began_ns = 900;
  s.gc(gc);
  s.event(free_at(3, 1010));
  const std::vector<json> lines = parse_lines(out);
  ASSERT_EQ(lines.size(), 4u);  // site, event, gc, event
  EXPECT_EQ(lines[2], json::parse(R"({"type":"gc","seq":2,"t":900,"end_time":1400,"tid":9})"));
  EXPECT_EQ(lines[3]["t"], 10);
  EXPECT_EQ(lines[3]["q"], 3);  // the gc record took seq 2
  EXPECT_EQ(s.events_written(), 2u);
}

// Stacks paused and resumed (format::Op::Pause / Resume): standalone records with absolute seq and t,
// which leave the event lines' deltas as they were and count as no event.
TEST(Serializer, PauseAndResumeAreRecordsOfTheirOwn) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  s.event(free_at(1, 1000));
  EventRecord pause{};
  pause.seq = 2;
  pause.time_ns = 1200;
  pause.tid = 9;
  pause.op = format::Op::Pause;
  pause.kind = format::Kind::None;
  s.pause(pause);
  EventRecord resume = pause;
  resume.seq = 3;
  resume.time_ns = 1300;
  resume.op = format::Op::Resume;
  s.pause(resume);
  s.event(free_at(4, 1010));
  const std::vector<json> lines = parse_lines(out);
  ASSERT_EQ(lines.size(), 5u);  // site, event, pause, resume, event
  EXPECT_EQ(lines[2], json::parse(R"({"type":"pause","seq":2,"t":1200,"tid":9})"));
  EXPECT_EQ(lines[3], json::parse(R"({"type":"resume","seq":3,"t":1300,"tid":9})"));
  EXPECT_EQ(lines[4]["t"], 10);
  EXPECT_EQ(lines[4]["q"], 4);
  EXPECT_EQ(s.events_written(), 2u);
}

TEST(Serializer, EventLinesAreCompactAndDeltaCoded) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  s.event(make_event(1, format::Op::Alloc, 0x7000, 64, {}));
  s.event(make_event(2, format::Op::Alloc, 0x7100, 0, {}));
  EventRecord failed = make_event(5, format::Op::Alloc, 0, 1 << 20, {});  // seq jumps (drops)
  failed.result = 2;
  s.event(failed);
  EventRecord late = make_event(6, format::Op::BlockAlloc, 0x7200, 8, {});
  late.kind = format::Kind::Block;
  late.api = "torch.alloc";
  late.flags = kDelayed;
  late.time_ns = 500;  // older than the line before it
  s.event(late);
  EventRecord other_thread = make_event(7, format::Op::Alloc, 0x7300, 64, {});
  other_thread.tid = 78;
  s.event(other_thread);

  std::vector<std::string> text;
  std::vector<json> raw;
  for (const std::string& line : text_lines(out))
    if (line.rfind("{\"e\":", 0) == 0) text.push_back(line), raw.push_back(json::parse(line));
  ASSERT_EQ(raw.size(), 5u);
  EXPECT_EQ(text[0], R"({"e":1,"t":1001,"a":"0x7000","s":64})");
  EXPECT_EQ(text[1], R"({"e":1,"t":1,"a":"0x7100"})");  // no size: 0
  EXPECT_EQ(raw[2]["q"], 5);
  EXPECT_EQ(raw[2]["r"], 2);
  EXPECT_EQ(raw[3]["t"], 500 - 1005);
  EXPECT_FALSE(raw[3].contains("q"));
  EXPECT_NE(raw[3]["e"], 1);
  EXPECT_NE(raw[4]["e"], 1);
  EXPECT_NE(raw[4]["e"], raw[3]["e"]);

  auto lines = expand_events(out);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[2]["seq"], 5);
  EXPECT_EQ(lines[2]["result"], 2);
  EXPECT_EQ(lines[3]["seq"], 6);
  EXPECT_EQ(lines[3]["t"], 500);
  EXPECT_EQ(lines[3]["delayed"], true);
  EXPECT_EQ(lines[3]["api"], "torch.alloc");
  EXPECT_EQ(lines[4]["tid"], 78);
  EXPECT_EQ(lines[4]["t"], 1007);
  size_t site_lines = 0;
  for (const json& l : parse_lines(out)) site_lines += l.contains("type") && l["type"] == "site";
  EXPECT_EQ(site_lines, 3u);
}

// The header's rank comes from the launcher's variables, the first of each list that holds a number
// (serializer.h); the environment block is /proc/self/environ's (NUL-ended "NAME=value" entries).
TEST(Serializer, RankFromTheLaunchersVariables) {
  using namespace std::string_literals;
  ProcessRank torchrun = rank_from_environment("PATH=/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0SLURM_PROCID=0\0"s);
  EXPECT_EQ(torchrun.rank, 3);
  EXPECT_EQ(torchrun.rank_from, "RANK");  // torchrun under srun: the worker's rank, not the agent's
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.world_size, 8);
  ProcessRank slurm = rank_from_environment("SLURM_PROCID=12\0SLURM_LOCALID=4\0SLURM_NTASKS=16\0"s);
  EXPECT_EQ(slurm.rank, 12);
  EXPECT_EQ(slurm.rank_from, "SLURM_PROCID");
  EXPECT_EQ(slurm.local_rank, 4);
  EXPECT_EQ(slurm.world_size, 16);
  ProcessRank mpi = rank_from_environment("OMPI_COMM_WORLD_RANK=2\0OMPI_COMM_WORLD_SIZE=4\0"s);
  EXPECT_EQ(mpi.rank, 2);
  EXPECT_EQ(mpi.rank_from, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(mpi.world_size, 4);
  EXPECT_EQ(rank_from_environment("PMI_RANK=5\0"s).rank, 5);
  EXPECT_EQ(rank_from_environment("MV2_COMM_WORLD_RANK=6\0"s).rank, 6);
  // Not a number, or no variable: not recorded. A name that only ends like one does not count.
  ProcessRank none = rank_from_environment("RANK=abc\0MY_RANK=1\0LOCAL_RANK=\0"s);
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.local_rank, -1);
  EXPECT_EQ(none.world_size, -1);
  EXPECT_EQ(rank_from_environment("").rank, -1);
}

TEST(Serializer, HeaderRecordsTheRankWhenSet) {
  std::string out;
  TraceSerializer s(&out, /*symbolize=*/false);
  HeaderInfo info = current_process_header(64, false);
  info.rank = rank_from_environment(std::string("RANK=3\0WORLD_SIZE=8\0", 20));
  s.header(info);
  const json header = json::parse(out.substr(0, out.find('\n')));
  EXPECT_EQ(header["rank"], 3);
  EXPECT_EQ(header["rank_from"], "RANK");
  EXPECT_EQ(header["world_size"], 8);
  EXPECT_FALSE(header.contains("local_rank"));
  out.clear();
  TraceSerializer plain(&out, /*symbolize=*/false);
  info.rank = ProcessRank();
  plain.header(info);
  EXPECT_FALSE(json::parse(out.substr(0, out.find('\n'))).contains("rank"));
}

}  // namespace
}  // namespace gpumemtrace
