// tests/unit/report_live_test.cpp — gpumemtrace top's parts: the live model (what a process holds as
// its trace is read), one screen of the view (GREW against the previous refresh, sort, filter, level,
// the screen's size), and a trace followed while it is written, plain and zstd (the lines reach the
// model before the file ends).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "report/analyses/live_model.h"
#include "report/outputs/top_view.h"
#include "report/reader/follow_source.h"
#include "report/reader/trace_reader.h"

using namespace gpumemtrace::report;

namespace {

constexpr uint64_t MiB = 1 << 20;

// Two Python call sites: stack 1 is grow_cache() called from main(), stack 2 load_weights().
const std::string kStart = std::string(R"({"type":"header","format":"gpumemtrace","version":1,"pid":7,"cmdline":["python","app.py"]})") + "\n" +
                           R"({"type":"frame","id":1,"lang":"python","function":"grow_cache","file":"/x/app.py","line":5})" + "\n" +
                           R"({"type":"frame","id":2,"lang":"python","function":"main","file":"/x/app.py","line":9})" + "\n" +
                           R"({"type":"frame","id":3,"lang":"python","function":"load_weights","file":"/x/app.py","line":2})" + "\n" +
                           R"({"type":"stack","id":1,"frames":[1,2]})" + "\n" + R"({"type":"stack","id":2,"frames":[3,2]})" + "\n";

std::string event(uint64_t seq, const char* op, uint64_t addr, uint64_t size, int stack, const std::string& extra = "") {
  char line[400];
  snprintf(line, sizeof line,
           R"({"type":"event","seq":%llu,"t":%llu,"op":"%s","kind":"device","api":"cudaMalloc","addr":"0x%llx","size":%llu,"device":0,"stack":%d%s})"
           "\n",
           static_cast<unsigned long long>(seq), static_cast<unsigned long long>(seq * 1000), op,
           static_cast<unsigned long long>(addr), static_cast<unsigned long long>(size), stack, extra.c_str());
  return line;
}

LiveState read_state(const std::string& text) {
  SymbolTable symbols;
  LiveModel model(symbols);
  auto source = memory_byte_source(text);
  read_trace(*source, "mem", symbols, model);
  return model.state();
}

const LiveSite* find_site(const LiveState& s, const std::string& function) {
  for (const LiveSite& site : s.sites)
    if (site.stack && !site.stack->empty() && site.stack->front().function == function) return &site;
  return nullptr;
}

std::string joined(const TopFrame& frame) {
  std::string text;
  for (const std::string& line : frame.lines) text += line + "\n";
  return text;
}

}  // namespace

// A PyTorch OOM is one failed request: the cudaMalloc, its retry after the cache was freed, then the
// allocator's block_oom. top counts it once, as the report does.
TEST(LiveModel, APyTorchOomIsOneOom) {
  auto block = [](uint64_t seq, const char* op, uint64_t addr, uint64_t size) {
    std::string line = event(seq, op, addr, size, 1);
    line.replace(line.find(R"("kind":"device","api":"cudaMalloc")"), 34, R"("kind":"block","api":"torch.alloc")");
    return line;
  };
  const std::string events = event(1, "alloc", 0x1000000, 20 * MiB, 1) + block(2, "block_alloc", 0x1000000, 4 * MiB) +
                             event(3, "alloc", 0, 64 * MiB, 1, R"(,"result":2)") +
                             event(4, "alloc", 0, 64 * MiB, 1, R"(,"result":2)") + block(5, "block_oom", 0, 64 * MiB);
  const LiveState s = read_state(kStart + events);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_TRUE(s.devices[0].has_blocks);
  EXPECT_EQ(s.devices[0].ooms, 1u);
  EXPECT_EQ(s.ooms, 1u);
}

TEST(LiveModel, LiveBytesPerSiteAndDeviceOomsAndTheEnd) {
  const std::string events = event(1, "alloc", 0x1000, 4 * MiB, 1) + event(2, "alloc", 0x9000000, 2 * MiB, 1) +
                             event(3, "alloc", 0x20000000, 8 * MiB, 2) + event(4, "free", 0x20000000, 0, 2) +
                             event(5, "alloc", 0, 64 * MiB, 2, R"(,"result":2)");
  const LiveState running = read_state(kStart + events);
  EXPECT_TRUE(running.started);
  EXPECT_FALSE(running.ended);
  EXPECT_EQ(running.events, 5u);
  EXPECT_EQ(running.ooms, 1u);
  ASSERT_EQ(running.devices.size(), 1u);
  EXPECT_EQ(running.devices[0].reserved, 6 * MiB);
  EXPECT_EQ(running.devices[0].peak_reserved, 14 * MiB);
  EXPECT_EQ(running.devices[0].ooms, 1u);
  ASSERT_EQ(running.sites.size(), 1u);  // load_weights' allocation was freed: it holds nothing
  const LiveSite* grow = find_site(running, "grow_cache");
  ASSERT_NE(grow, nullptr);
  EXPECT_EQ(grow->bytes, 6 * MiB);
  EXPECT_EQ(grow->count, 2u);
  EXPECT_EQ(grow->level, Level::Allocation);

  EXPECT_TRUE(read_state(kStart + events + "{\"type\":\"footer\",\"end\":\"exit\",\"exit_status\":0}\n").ended);
}

TEST(TopView, GrewSinceTheLastRefreshSortFilterAndSize) {
  const std::string first = event(1, "alloc", 0x1000, 4 * MiB, 1) + event(2, "alloc", 0x20000000, 8 * MiB, 2);
  const LiveState before = read_state(kStart + first);
  const LiveState now = read_state(kStart + first + event(3, "alloc", 0x9000000, 2 * MiB, 1));
  TopScreen screen;
  screen.source = "t.jsonl";
  screen.width = 0;
  screen.height = 0;

  screen.refresh = 1;  // nothing to compare with: no GREW figure, and no device growth
  std::string text = joined(render_top(now, before, screen));
  EXPECT_EQ(text.find("+2.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("pid 7, running \u2014 python app.py"), std::string::npos) << text;

  screen.refresh = 2;
  TopFrame frame = render_top(now, before, screen);
  text = joined(frame);
  EXPECT_NE(text.find("14.0 MiB reserved (+2.0 MiB)"), std::string::npos) << text;
  ASSERT_LT(frame.table_header + 2, frame.lines.size());
  const std::string& top_row = frame.lines[frame.table_header + 1];  // live bytes first: load_weights
  EXPECT_NE(top_row.find("load_weights (/x/app.py:2) < main"), std::string::npos) << text;
  EXPECT_NE(frame.lines[frame.table_header + 2].find("+2.0 MiB"), std::string::npos) << text;

  screen.sort = TopSort::Grew;
  frame = render_top(now, before, screen);
  EXPECT_NE(frame.lines[frame.table_header + 1].find("grow_cache"), std::string::npos) << joined(frame);

  screen.filter = "LOAD_w";  // case-insensitive
  text = joined(render_top(now, before, screen));
  EXPECT_NE(text.find("1 site, 8.0 MiB live"), std::string::npos) << text;
  EXPECT_EQ(text.find("grow_cache"), std::string::npos) << text;

  screen.device = 0;  // one device: no DEV column, and the title says which
  text = joined(render_top(now, before, screen));
  EXPECT_NE(text.find("1 site, 8.0 MiB live on device 0; sorted by grew"), std::string::npos) << text;
  EXPECT_EQ(text.find("DEV"), std::string::npos) << text;
  screen.device = kAllDevices;

  screen.filter.clear();
  screen.level = Level::Block;  // no allocator blocks in this trace
  text = joined(render_top(now, before, screen));
  EXPECT_NE(text.find("caching-allocator blocks by call site: 0 sites"), std::string::npos) << text;

  screen.level = Level::Allocation;
  screen.width = 50;
  screen.height = 9;  // room for one line of the table: it counts the rows it has no room for
  frame = render_top(now, before, screen);
  EXPECT_EQ(frame.lines.size(), 9u);
  for (const std::string& line : frame.lines) EXPECT_LE(line.size(), 50u) << line;
  EXPECT_NE(joined(frame).find("... 2 more sites"), std::string::npos) << joined(frame);
}

namespace {

// A LiveModel fed by read_trace on its own thread from a followed file, as gpumemtrace top does.
class Follower : public FollowControl {
 public:
  explicit Follower(const std::string& path) : path_(path) {
    thread_ = std::thread([this] {
      try {
        auto source = follow_byte_source(path_, *this);
        read_trace(*source, path_, symbols_, model_);
      } catch (const std::exception& e) {
        error_ = e.what();
      }
      done_ = true;
    });
  }
  ~Follower() override {
    quit_ = true;
    thread_.join();
  }
  bool stop_now() override { return quit_; }
  bool keep_waiting() override { return !quit_ && !ended_; }

  // Waits up to 10 s for `events` events read; the count then.
  uint64_t wait_for_events(uint64_t events) {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (model_.state().events >= events) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return model_.state().events;
  }
  bool wait_until_done() {
    for (int i = 0; i < 1000 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done_;
  }
  void end() { ended_ = true; }
  std::string error() const { return done_ ? error_ : ""; }

 private:
  // The model is read here while the reader thread feeds it: both under mutex_.
  class Locked : public TraceHandler {
   public:
    Locked(const SymbolTable& symbols, std::mutex& mutex) : model_(symbols), mutex_(mutex) {}
    void on_header(const Header& h) override { std::lock_guard<std::mutex> l(mutex_); model_.on_header(h); }
    void on_event(const Event& e) override { std::lock_guard<std::mutex> l(mutex_); model_.on_event(e); }
    void on_footer(const Footer& f) override { std::lock_guard<std::mutex> l(mutex_); model_.on_footer(f); }
    LiveState state() const { return model_.state(); }

   private:
    LiveModel model_;
    std::mutex& mutex_;
  };
  std::string path_;
  SymbolTable symbols_;
  std::mutex mutex_;
  Locked model_{symbols_, mutex_};
  std::thread thread_;
  std::atomic<bool> quit_{false}, ended_{false}, done_{false};
  std::string error_;
};

std::string temp_path(const char* suffix) {
  char dir[] = "/tmp/gpumem-live-test-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return std::string(dir) + "/t.jsonl" + suffix;
}

// Appends `text` to the file, as zstd frames flushed at once when `zstd` (as the recorder writes).
class Writer {
 public:
  Writer(const std::string& path, bool zstd) : out_(path, std::ios::binary), zstd_(zstd ? ZSTD_createCCtx() : nullptr) {}
  ~Writer() { ZSTD_freeCCtx(zstd_); }
  void append(const std::string& text) {
    if (!zstd_) {
      out_ << text << std::flush;
      return;
    }
    std::string buffer(ZSTD_compressBound(text.size()) + 64, '\0');
    ZSTD_inBuffer in{text.data(), text.size(), 0};
    ZSTD_outBuffer out{buffer.data(), buffer.size(), 0};
    ZSTD_compressStream2(zstd_, &out, &in, ZSTD_e_flush);
    out_.write(buffer.data(), static_cast<std::streamsize>(out.pos));
    out_.flush();
  }

 private:
  std::ofstream out_;
  ZSTD_CCtx* zstd_;
};

void follow_a_growing_trace(bool zstd) {
  const std::string path = temp_path(zstd ? ".zst" : "");
  {
  Writer writer(path, zstd);
  writer.append(kStart + event(1, "alloc", 0x1000, MiB, 1));
  Follower follower(path);
  // The line is handed on although the file (and the reader's block) has no more for now.
  EXPECT_EQ(follower.wait_for_events(1), 1u);
  writer.append(event(2, "alloc", 0x9000000, MiB, 1) + event(3, "alloc", 0x12000000, MiB, 1));
  EXPECT_EQ(follower.wait_for_events(3), 3u);
  writer.append("{\"type\":\"footer\",\"end\":\"exit\",\"exit_status\":0}\n");
  follower.end();  // as top's control does once the footer is read
  EXPECT_TRUE(follower.wait_until_done());
  EXPECT_EQ(follower.error(), "");
  }
  std::remove(path.c_str());
  rmdir(path.substr(0, path.rfind('/')).c_str());
}

}  // namespace

TEST(FollowSource, LinesReachTheModelWhileThePlainFileGrows) { follow_a_growing_trace(false); }
TEST(FollowSource, LinesReachTheModelWhileTheZstdFileGrows) { follow_a_growing_trace(true); }

// A line that is no trace line ends the read with its error at once, though the writer may still
// write: the line reader cancels the source's wait as it stops (byte_source.h, cancel()).
TEST(FollowSource, AnErrorEndsTheReadWithoutWaitingForTheWriter) {
  const std::string path = temp_path("");
  {
    Writer writer(path, false);
    writer.append(kStart + event(1, "alloc", 0x1000, MiB, 1));
    Follower follower(path);  // never told that the trace ended
    // The first block is parsed; the reader's read-ahead thread now waits for the file to grow.
    EXPECT_EQ(follower.wait_for_events(1), 1u);
    writer.append("not json\n");
    EXPECT_TRUE(follower.wait_until_done());
    EXPECT_NE(follower.error().find(":8:"), std::string::npos) << follower.error();  // the bad line's number
  }
  std::remove(path.c_str());
  rmdir(path.substr(0, path.rfind('/')).c_str());
}

TEST(FollowSource, AFileThatCannotBeOpenedThrows) {
  struct Never : FollowControl {
    bool stop_now() override { return false; }
    bool keep_waiting() override { return false; }
  } never;
  EXPECT_THROW(follow_byte_source("/nonexistent/t.jsonl", never), std::runtime_error);
}
