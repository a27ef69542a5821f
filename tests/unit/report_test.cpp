// tests/unit/report_test.cpp — unit tests of gpumem-report's pieces: line splitting, reader
// validation, verdict rules, sizes, suppressions. The end-to-end behaviour is tested in tests/report/.
#include <gtest/gtest.h>

#include <string>

#include "report/analyses/analyze.h"
#include "report/analyses/suppressions.h"
#include "report/analyses/growth.h"
#include "report/analyses/oom_incidents.h"
#include "report/analyses/passes.h"
#include "report/outputs/units.h"
#include "report/reader/line_reader.h"
#include "report/reader/trace_reader.h"

using namespace gpumemtrace::report;

namespace {
constexpr uint64_t MiB = 1 << 20;
const char* kHeader = R"({"type":"header","format":"gpumemtrace","version":1,"pid":7})";

ProcessReport analyze_text(const std::string& text) {
  auto source = memory_byte_source(text);
  return analyze_source(*source, "mem", Suppressions());
}
}  // namespace

TEST(LineReader, SplitsAcrossChunksAndKeepsAnUnterminatedLastLine) {
  std::string text = "a\nbbbbbbbbbbbbbbbbbbbb\n\nccc";
  auto source = memory_byte_source(text);
  LineReader reader(*source, 4);  // chunk smaller than a line: forces growth and compaction
  Line line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "a");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "bbbbbbbbbbbbbbbbbbbb");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "ccc");
  EXPECT_FALSE(line.terminated);
  EXPECT_EQ(line.number, 4u);
  EXPECT_FALSE(reader.next(line));
}

// A file without newlines is not read into memory whole: past the cap it is an error.
TEST(LineReaderLimit, ALineLongerThanTheCapIsAnError) {
  std::string text = "short\n" + std::string(100, 'x') + "\nafter";
  auto source = memory_byte_source(text);
  LineReader reader(*source, 8, 64);
  Line line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "short");
  EXPECT_THROW(reader.next(line), std::runtime_error);

  std::string fits = std::string(64, 'y') + "\n";
  auto ok_source = memory_byte_source(fits);
  LineReader ok_reader(*ok_source, 8, 64);
  ASSERT_TRUE(ok_reader.next(line));
  EXPECT_EQ(line.text.size(), 64u);
}

TEST(Reader, RejectsACorruptMiddleLineWithItsNumber) {
  std::string text = std::string(kHeader) + "\n{\"type\":\"ev\n{\"type\":\"footer\"}\n";
  try {
    analyze_text(text);
    FAIL() << "no error";
  } catch (const TraceError& error) {
    EXPECT_EQ(error.line(), 2u);
    EXPECT_EQ(error.file(), "mem");
  }
}

TEST(Reader, TruncatedLastLineIsAWarning) {
  ProcessReport r = analyze_text(std::string(kHeader) + "\n{\"type\":\"ev");
  EXPECT_TRUE(r.truncated);
  EXPECT_FALSE(r.complete);
  ASSERT_EQ(r.warnings.size(), 1u);
}

TEST(Reader, IgnoresUnknownFieldsAndRecordTypes) {
  ProcessReport r = analyze_text(std::string(kHeader) +
                                 "\n{\"type\":\"future\",\"x\":[1,{\"y\":2}]}\n"
                                 "{\"type\":\"event\",\"seq\":1,\"op\":\"alloc\",\"kind\":\"device\","
                                 "\"addr\":\"0x10\",\"size\":5,\"device\":0,\"new_field\":{\"a\":1}}\n");
  EXPECT_EQ(r.events, 1u);
  EXPECT_EQ(r.live_when_cut_bytes(), 5u);  // no footer: live when cut, not a leak
  EXPECT_EQ(r.leaked_bytes(), 0u);
}

TEST(Reader, KeepsEachFramesAddressAndModuleOffset) {
  ProcessReport r = analyze_text(std::string(kHeader) +
                                 "\n{\"type\":\"module\",\"id\":1,\"path\":\"/opt/lib/libx.so\",\"base\":\"0x7f0000000000\"}"
                                 "\n{\"type\":\"frame\",\"id\":1,\"ip\":\"0x7f0000001a2b\",\"module\":1,\"offset\":\"0x1a2b\"}"
                                 "\n{\"type\":\"frame\",\"id\":2,\"ip\":\"0x4000\",\"function\":\"jit\"}"
                                 "\n{\"type\":\"stack\",\"id\":1,\"frames\":[1,2]}"
                                 "\n{\"type\":\"event\",\"seq\":1,\"op\":\"alloc\",\"kind\":\"device\","
                                 "\"addr\":\"0x10\",\"size\":5,\"device\":0,\"stack\":1}\n");
  ASSERT_EQ(r.leaks.size(), 1u);
  const Stack& stack = r.leaks[0].stack;
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[0].ip, 0x7f0000001a2bu);
  EXPECT_EQ(stack[0].offset, 0x1a2bu);
  EXPECT_EQ(stack[0].module, "/opt/lib/libx.so");
  EXPECT_EQ(stack[1].ip, 0x4000u);
  EXPECT_EQ(stack[1].offset, 0u);  // no module: no offset
}

// Format version 2: an event line takes its site's fields; seq counts on unless "q" says otherwise;
// "t" is a signed difference from the previous event line's time.
TEST(Reader, Version2EventLinesExpandToTheirSitesFields) {
  struct Collect : TraceHandler {
    std::vector<Event> events;
    std::vector<std::string> apis;
    void on_event(const Event& e) override {
      events.push_back(e);
      apis.emplace_back(e.api);
    }
  } collect;
  const std::string text =
      R"({"type":"header","format":"gpumemtrace","version":2,"pid":7})"
      "\n{\"type\":\"frame\",\"id\":1,\"function\":\"f\"}\n{\"type\":\"stack\",\"id\":1,\"frames\":[1]}"
      "\n{\"type\":\"site\",\"id\":1,\"tid\":9,\"api\":\"cudaMalloc\",\"op\":\"alloc\",\"kind\":\"device\",\"device\":0,\"stack\":1}"
      "\n{\"e\":1,\"t\":1000,\"a\":\"0x10\",\"s\":5}"
      "\n{\"type\":\"site\",\"id\":2,\"tid\":9,\"api\":\"torch.alloc\",\"op\":\"block_alloc\",\"kind\":\"block\","
      "\"device\":1,\"stack\":0,\"delayed\":true}"
      "\n{\"e\":2,\"t\":-400,\"q\":7,\"a\":\"0x10\",\"s\":2,\"segment\":\"0x10\"}"
      "\n{\"e\":1,\"t\":900,\"a\":\"0x0\",\"s\":64,\"r\":2}\n";
  auto source = memory_byte_source(text);
  SymbolTable symbols;
  ReadResult result = read_trace(*source, "mem", symbols, collect);
  EXPECT_EQ(result.events, 3u);
  ASSERT_EQ(collect.events.size(), 3u);
  const Event& a = collect.events[0];
  EXPECT_EQ(a.seq, 1u);
  EXPECT_EQ(a.t, 1000u);
  EXPECT_EQ(a.tid, 9u);
  EXPECT_EQ(a.op, Op::Alloc);
  EXPECT_EQ(a.kind, Kind::Device);
  EXPECT_EQ(a.addr, 0x10u);
  EXPECT_EQ(a.size, 5u);
  EXPECT_EQ(a.stack.value, 1u);
  EXPECT_EQ(a.result, 0);
  EXPECT_FALSE(a.delayed);
  const Event& b = collect.events[1];
  EXPECT_EQ(b.seq, 7u);
  EXPECT_EQ(b.t, 600u);
  EXPECT_EQ(b.op, Op::BlockAlloc);
  EXPECT_EQ(b.device, 1);
  EXPECT_TRUE(b.delayed);
  EXPECT_TRUE(b.has_segment);
  EXPECT_EQ(b.segment, 0x10u);
  const Event& c = collect.events[2];
  EXPECT_EQ(c.seq, 8u);
  EXPECT_EQ(c.t, 1500u);
  EXPECT_EQ(c.result, 2);
  EXPECT_FALSE(c.has_segment);
  EXPECT_EQ(collect.apis, (std::vector<std::string>{"cudaMalloc", "torch.alloc", "cudaMalloc"}));
}

// Version 2 event lines in the recorder's shape are read without simdjson (trace_reader.cpp,
// CompactEventScanner); a space after the "{" sends the same line through simdjson. Both must read
// every line alike: the same event, or the same error.
TEST(Reader, Version2EventLinesReadAlikeWithAndWithoutSimdjson) {
  struct Describe : TraceHandler {
    std::string text;
    void on_event(const Event& e) override {
      text += "seq=" + std::to_string(e.seq) + " t=" + std::to_string(e.t) + " addr=" + std::to_string(e.addr) +
              " size=" + std::to_string(e.size) + " result=" + std::to_string(e.result) +
              " segment=" + std::to_string(e.has_segment) + ":" + std::to_string(e.segment) +
              " handle=" + std::to_string(e.has_handle) + ":" + std::to_string(e.handle) +
              " meminfo=" + std::to_string(e.has_meminfo) + ":" + std::to_string(e.free) + "/" + std::to_string(e.total) +
              " pool=" + std::string(e.pool) + " label=" + std::string(e.label) + " range=" + std::to_string(e.range) +
              " api=" + std::string(e.api) + "\n";
    }
  };
  auto read = [](const std::string& event_line) {
    const std::string text =
        R"({"type":"header","format":"gpumemtrace","version":2,"pid":7})"
        "\n{\"type\":\"site\",\"id\":1,\"tid\":9,\"api\":\"cudaMalloc\",\"op\":\"alloc\",\"kind\":\"device\",\"device\":0,\"stack\":0}"
        "\n{\"e\":1,\"t\":100}\n" + event_line + "\n";
    Describe describe;
    auto source = memory_byte_source(text);
    SymbolTable symbols;
    try {
      read_trace(*source, "mem", symbols, describe);
    } catch (const TraceError& error) {
      return std::string("error: ") + error.what();
    }
    return describe.text;
  };
  const std::vector<std::string> lines = {
      R"({"e":1,"t":5,"a":"0x10","s":8})",
      R"({"e":1,"t":-5,"a":"0x10"})",
      R"({"e":1,"t":-0})",
      R"({"e":1,"t":-9223372036854775808})",
      R"({"e":1,"t":-9223372036854775809})",
      R"({"e":1,"t":9999999999999999999})",
      R"({"e":1,"t":18446744073709551615})",
      R"({"e":1,"t":5,"s":01})",
      R"({"e":1,"t":5,"s":1.5})",
      R"({"e":1,"t":5,"s":1e3})",
      R"({"e":1,"t":5,"s":9007199254740991})",
      R"({"e":1,"t":5,"s":9007199254740992})",
      R"({"e":1,"t":5,"s":-1})",
      R"({"e":1,"t":5,"r":-2147483648})",
      R"({"e":1,"t":5,"r":9223372036854775807})",
      R"({"e":1,"t":5,"r":9223372036854775808})",
      R"({"e":1,"t":5,"a":"0x"})",
      R"({"e":1,"t":5,"a":"0xAbC"})",
      R"({"e":1,"t":5,"a":"0x1234567890abcdef"})",
      R"({"e":1,"t":5,"a":"0x1234567890abcdef0"})",
      R"({"e":1,"t":5,"a":"0x1g"})",
      R"({"e":1,"t":5,"a":"0xffffffffffffffff","s":1})",
      R"({"e":1,"t":5,"a":10})",
      R"({"e":1,"t":5,"segment":"0x20","label":"x y","pool":"big","free":3,"total":4,"range":2,"handle":"0x5","stream":"0x9"})",
      R"({"e":1,"t":5,"pool":"0x7f00"})",
      R"({"e":1,"t":5,"label":"caf\u00e9 \"q\""})",
      R"({"e":1,"t":5,"label":"café"})",
      R"({"e":1,"t":5,"free":1})",
      R"({"e":1,"t":5,"e":1})",
      R"({"e":1,"t":5,"unknown":[1,{"x":2}]})",
      R"({"e":1,"t":5,"seq":9,"size":3,"op":"free"})",
      R"({"e":1,"t":5}x)",
      R"({"e":1,"t":5,})",
      R"({"e":1,"t":5)",
      R"({"e":4294967296,"t":5})",
      R"({"e":2,"t":5})",
      R"({"e":1,"t":5,"q":1})",
      R"({"e":1,"t":5,"q":7})",
      R"({"e":1,"t":"5"})",
      R"({"e":1,"t":5,"label":3})",
      R"({"e":1,"t":5,"segment":"0x1","segment":"0x2"})",
  };
  for (const std::string& line : lines) {
    const std::string spaced = "{ " + line.substr(1);  // not the recorder's shape: simdjson reads it
    EXPECT_EQ(read(line), read(spaced)) << line;
  }
  EXPECT_EQ(read(lines[0]), "seq=1 t=100 addr=0 size=0 result=0 segment=0:0 handle=0:0 meminfo=0:0/0 pool= label= range=0 api=cudaMalloc\n"
                            "seq=2 t=105 addr=16 size=8 result=0 segment=0:0 handle=0:0 meminfo=0:0/0 pool= label= range=0 api=cudaMalloc\n");
  EXPECT_NE(read(R"({"e":1,"t":5,"s":01})").find("error: "), std::string::npos);
}

OomFigures figures(uint64_t requested, bool has_free, uint64_t free, uint64_t total, uint64_t ours) {
  OomFigures f;
  f.requested = requested;
  f.has_device_free = has_free;
  f.device_free = free;
  f.device_total = total;
  f.ours = ours;
  return f;
}

TEST(Verdict, RequestLargerThanEveryGapIsFragmentation) {
  OomFigures f = figures(20 * MiB, true, 5 * MiB, 200 * MiB, 195 * MiB);
  f.has_blocks = true;
  f.fragmentation.reserved = 100 * MiB;
  f.fragmentation.allocated = 60 * MiB;
  f.fragmentation.free_in_reserved = 40 * MiB;
  f.fragmentation.largest_free_block = 10 * MiB;
  std::string why;
  EXPECT_EQ(oom_verdict(f, &why), Verdict::Fragmentation);
  EXPECT_NE(why.find("largest free block is 10.0 MiB"), std::string::npos) << why;
  f.requested = 50 * MiB;
  EXPECT_EQ(oom_verdict(f, nullptr), Verdict::Capacity);
  f.requested = 8 * MiB;  // fits in the largest free block: nothing the trace shows explains it
  EXPECT_EQ(oom_verdict(f, nullptr), Verdict::NotEnoughInformation);
  EXPECT_DOUBLE_EQ(f.fragmentation.ratio(), 0.75);
}

TEST(Verdict, NoBlockDataIsCapacityWhenTheDeviceIsFull) {
  EXPECT_EQ(oom_verdict(figures(20 * MiB, true, 5 * MiB, 80 * MiB, 75 * MiB), nullptr), Verdict::Capacity);
  // Nothing known about the device: no verdict is honest.
  EXPECT_EQ(oom_verdict(figures(20 * MiB, false, 0, 0, 75 * MiB), nullptr), Verdict::NotEnoughInformation);
  // Larger than the whole device: capacity whatever else is known.
  EXPECT_EQ(oom_verdict(figures(100 * MiB, false, 0, 80 * MiB, 0), nullptr), Verdict::Capacity);
}

TEST(Verdict, OtherProcessesHoldTheDevice) {
  // 5 MiB free of 80; this process holds 10, so others hold 65: more than the request and > 5%.
  EXPECT_EQ(oom_verdict(figures(20 * MiB, true, 5 * MiB, 80 * MiB, 10 * MiB), nullptr), Verdict::OtherProcesses);
  // Others hold 2 MiB only: this process filled the device.
  EXPECT_EQ(oom_verdict(figures(20 * MiB, true, 5 * MiB, 80 * MiB, 73 * MiB), nullptr), Verdict::Capacity);
}

TEST(Verdict, AllocatorLimitWhenOnlyTheAllocatorRefusedWithRoomOnTheDevice) {
  // torch.cuda.set_per_process_memory_fraction(0.02) on an H100: 2 GiB refused, 76.9 GiB free.
  OomFigures f = figures(2048 * MiB, true, 78745 * MiB, 81080 * MiB, 256 * MiB);
  f.allocator_only = true;
  std::string why;
  EXPECT_EQ(oom_verdict(f, &why), Verdict::AllocatorLimit);
  EXPECT_NE(why.find("set_per_process_memory_fraction"), std::string::npos) << why;
  f.allocator_only = false;  // a CUDA call failed too: not the allocator's own cap
  EXPECT_NE(oom_verdict(f, nullptr), Verdict::AllocatorLimit);
}

TEST(Verdict, AStaleReadingIsCorrectedByWhatTheProcessReservedSince) {
  // Read at 928 MiB free while the process held 96 MiB; it holds 1022 MiB of the 1 GiB device now.
  OomFigures f = figures(8 * MiB, true, 928 * MiB, 1024 * MiB, 1022 * MiB);
  f.allocator_only = true;
  f.reading_reserved = 96 * MiB;
  EXPECT_EQ(usable_free(f), 2 * MiB);
  std::string why;
  EXPECT_EQ(oom_verdict(f, &why), Verdict::Capacity);
  EXPECT_NE(why.find("the device's last reading, 928.0 MiB free, was taken while this process held 96.0 MiB"),
            std::string::npos) << why;
  // Memory released since the reading went back to the device.
  f = figures(8 * MiB, true, 10 * MiB, 1024 * MiB, 100 * MiB);
  f.reading_reserved = 300 * MiB;
  EXPECT_EQ(usable_free(f), 210 * MiB);
  // Whenever taken, never more than the device's total less what the process holds.
  f = figures(8 * MiB, true, 928 * MiB, 1024 * MiB, 1022 * MiB);
  EXPECT_EQ(usable_free(f), 2 * MiB);
  f.allocator_only = true;
  EXPECT_EQ(oom_verdict(f, &why), Verdict::Capacity) << why;
}

TEST(Verdict, HolesBetweenPlainAllocationsAreFragmentation) {
  // 512 MiB free on a full 1 GiB device, in 16 MiB holes: 496 MiB inside the span, 16 MiB beyond.
  OomFigures f = figures(128 * MiB, true, 512 * MiB, 1024 * MiB, 512 * MiB);
  f.has_address_gaps = true;
  f.address_gaps = AddressGaps{1008 * MiB, 496 * MiB, 16 * MiB};
  std::string why;
  EXPECT_EQ(oom_verdict(f, &why), Verdict::Fragmentation);
  EXPECT_NE(why.find("the largest 16.0 MiB, and at most 16.0 MiB beyond them"), std::string::npos) << why;
  f.requested = 16 * MiB;  // a hole fits it: nothing the trace shows explains the failure
  EXPECT_EQ(oom_verdict(f, nullptr), Verdict::NotEnoughInformation);
  f.requested = 128 * MiB;
  f.address_gaps.span = 2048 * MiB;  // addresses over more than the device: not one heap of its size
  EXPECT_EQ(oom_verdict(f, nullptr), Verdict::NotEnoughInformation);
  f.address_gaps.span = 1008 * MiB;
  f.device_free = 256 * MiB;  // holes larger than the free bytes: something unseen fills them
  EXPECT_EQ(oom_verdict(f, nullptr), Verdict::NotEnoughInformation);
  f.device_free = 512 * MiB;
  f.device_total = 0;  // the device's size unknown
  EXPECT_EQ(oom_verdict(f, nullptr), Verdict::NotEnoughInformation);
}

TEST(Verdict, FiguresThatContradictEachOtherGiveNoVerdict) {
  // A stand-in's reading: more free than the device holds. Neither figure can be trusted.
  OomFigures f = figures(200 * MiB, true, 120 * MiB, 80 * MiB, 10 * MiB);
  std::string why;
  EXPECT_EQ(oom_verdict(f, &why), Verdict::NotEnoughInformation);
  EXPECT_NE(why.find("contradict each other"), std::string::npos) << why;
}

TEST(Growth, RisingEveryWindowGrowsWarmupAndOneOffDoNot) {
  Ledger::Site steady;
  steady.rises = 50;
  steady.first_high = MiB;
  steady.high = 50 * MiB;
  steady.windows = 0xFFFFFFFFu;
  EXPECT_TRUE(is_growing(steady, 32));
  Ledger::Site warmup = steady;
  warmup.windows = 0x3;  // all highs in the first two windows
  EXPECT_FALSE(is_growing(warmup, 32));
  Ledger::Site one_off;
  one_off.rises = 1;
  one_off.first_high = one_off.high = MiB;
  one_off.windows = 1;
  EXPECT_FALSE(is_growing(one_off, 32));
  Ledger::Site filled_then_flat = steady;
  filled_then_flat.windows = 0xFFFFu;  // rose in every window of the first half, then never
  EXPECT_FALSE(is_growing(filled_then_flat, 32));
  Ledger::Site to_the_end = steady;
  to_the_end.windows = 0xFFu << 24;  // the last quarter only: not spread over half the run
  EXPECT_FALSE(is_growing(to_the_end, 32));
  to_the_end.windows = 0xFFFF0000u;  // the second half, into the last window
  EXPECT_TRUE(is_growing(to_the_end, 32));
}

// A rise is a new high the site kept memory for: its floor since the previous high went up.
TEST(Growth, NewHighsFromTheSameFloorAreNoRises) {
  Ledger kept, larger;
  for (uint32_t i = 0; i < 10; ++i) {
    kept.add(SiteId(1), MiB, i, i, i);            // kept: 1, 2, 3 ... MiB
    larger.add(SiteId(1), MiB + i, i, i, i);      // one byte larger each time ...
    larger.remove(SiteId(1), MiB + i, "");        // ... and freed
  }
  EXPECT_EQ(kept.sites().at(SiteId(1)).rises, 10u);
  EXPECT_EQ(larger.sites().at(SiteId(1)).rises, 1u);  // its first high only
  EXPECT_EQ(larger.sites().at(SiteId(1)).high, MiB + 9);
}

// A pass is a run of blocks of one phase: another role's block or a backward() ends it.
TEST(Passes, AnotherRolesBlockOrABackwardStartsANewPass) {
  Passes passes;
  const uint64_t first = passes.on_block(Role::Activations);
  EXPECT_NE(first, 0u);
  EXPECT_EQ(passes.on_block(Role::Activations), first);  // the next layer: the same forward pass
  EXPECT_EQ(passes.on_block(Role::Other), 0u);           // the loss, the next batch: no phase ...
  const uint64_t second = passes.on_block(Role::Activations);
  EXPECT_GT(second, first);                              // ... and the forward pass after it is another
  passes.on_backward_begin();
  const uint64_t backward = passes.on_block(Role::BackwardTemporaries);
  EXPECT_GT(backward, second);
  EXPECT_EQ(passes.on_block(Role::Gradients), backward);  // one backward pass
  EXPECT_GT(passes.on_block(Role::OptimizerState), backward);
  passes.on_backward_begin();  // a backward() ends the forward pass even where it allocates nothing first
  const uint64_t third = passes.on_block(Role::Activations);
  EXPECT_GT(third, backward);
}

// Memory of a step's phase grows only across passes: rising in every window of one forward pass (the
// identical layers of one model, until the device is full) is that pass's memory.
TEST(Growth, RisesInsideOnePassAreNoGrowth) {
  auto run = [](bool new_pass_each_step) {
    Ledger ledger;
    GrowthWindows windows;
    uint64_t pass = 1;
    for (uint64_t seq = 1; seq <= 200; ++seq) {
      bool widened = false;
      const uint32_t w = windows.window_of(seq, &widened);
      if (widened) ledger.fold_windows();
      if (new_pass_each_step) ++pass;
      ledger.add(SiteId(1), MiB, seq, seq, w, pass);
    }
    const Ledger::Site& site = ledger.sites().at(SiteId(1));
    return std::make_pair(site.passes, is_growing(site, windows.used(200)));
  };
  EXPECT_EQ(run(false), std::make_pair(1u, false));
  EXPECT_EQ(run(true), std::make_pair(200u, true));
  Ledger::Site no_phase;  // no role with a phase (a trace without PyTorch roles): the windows alone
  no_phase.rises = 50;
  no_phase.first_high = MiB;
  no_phase.high = 50 * MiB;
  no_phase.windows = 0xFFFFFFFFu;
  EXPECT_TRUE(is_growing(no_phase, 32));
  Ledger::Site few = no_phase;  // rising in every window, but in 7 passes: fewer than the 8 windows it needs
  few.passes = 7;
  EXPECT_FALSE(is_growing(few, 32));
  few.passes = 8;
  EXPECT_TRUE(is_growing(few, 32));
}

TEST(Units, FormatsSizes) {  // parsing: tests/unit/util_test.cpp
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 * MiB), "3.0 MiB");
}

TEST(Suppressions, MatchLikeLsan) {
  EXPECT_TRUE(suppression_matches("plant_*", "plant_leak"));
  EXPECT_TRUE(suppression_matches("leak", "plant_leak"));
  EXPECT_FALSE(suppression_matches("^leak", "plant_leak"));
  EXPECT_TRUE(suppression_matches("libfoo.so$", "/usr/lib/libfoo.so"));
  EXPECT_FALSE(suppression_matches("libfoo.so$", "/usr/lib/libfoo.so.1"));
  EXPECT_THROW(Suppressions::parse("race:foo\n", "s"), std::runtime_error);
}

// A level's total grows when what it holds once each window's temporaries are gone (its floor)
// rises; memory moving between sites (a bounded cache refilled from a second site) leaves it flat.
TEST(Growth, TheTotalsFloorRisesOnlyWhenMemoryIsKept) {
  // 64 entries of 1 MiB stored, then 200 iterations with a temporary of 4 MiB, each storing one more
  // entry from a second site, and (`bounded`) evicting the oldest.
  auto run = [](bool bounded, uint64_t* rise) {
    Ledger ledger;
    GrowthWindows windows;
    const SiteId fill = make_site(StackId(1)), refill = make_site(StackId(2)), temp = make_site(StackId(3));
    uint64_t seq = 0;
    uint32_t w = 0;
    auto tick = [&] {
      bool widened = false;
      w = windows.window_of(++seq, &widened);
      if (widened) ledger.fold_windows();
    };
    std::vector<SiteId> cache;
    for (int i = 0; i < 64; ++i) {
      tick();
      ledger.add(fill, MiB, seq, seq, w);
      cache.push_back(fill);
    }
    for (int i = 0; i < 200; ++i) {
      tick();
      ledger.add(temp, 4 * MiB, seq, seq, w);
      ledger.remove(temp, 4 * MiB, "", w);
      if (bounded) {
        ledger.remove(cache.front(), MiB, "", w);
        cache.erase(cache.begin());
      }
      ledger.add(refill, MiB, seq, seq, w);
      cache.push_back(refill);
    }
    return ledger.floor_grows(windows.used(seq), rise);
  };
  uint64_t rise = 0;
  EXPECT_TRUE(run(false, &rise));
  EXPECT_GT(rise, 200 * MiB);  // a window's floor is the least it held in it: up to a window's rise less
  EXPECT_FALSE(run(true, &rise));  // filled at the start, then flat
  EXPECT_LE(rise, 64 * MiB);
}
