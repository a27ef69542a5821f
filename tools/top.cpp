// tools/top.cpp — `gpumemtrace top [--interval S] [--batch] PID | TRACE`: a running process's GPU
// memory, refreshed each second from its trace (docs/launcher.md, "gpumemtrace top").
//
// Two threads. The reader follows the trace as it grows (report/reader/follow_source.h: the file's
// end is waited at, not taken for the end) and feeds a LiveModel (report/analyses/live_model.h),
// under one mutex. The main thread takes the model's state at each refresh, renders it
// (report/outputs/top_view.h) with what grew since the previous refresh, and reads keys. PID: the
// trace is found among the process's open files (its recorder's writer holds it); the view ends
// when the process is gone or its trace finished. TRACE: any trace file, also one another host is
// writing on a shared file system; the view waits for its footer.
// Interactive on a terminal (its own screen, restored at the end); --batch, or a standard output
// that is no terminal, prints a plain screen per refresh and ends with the trace.
#include "tools/top.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "report/analyses/live_model.h"
#include "tools/subcommand.h"
#include "tools/traced_process.h"
#include "report/outputs/top_view.h"
#include "report/reader/follow_source.h"
#include "report/reader/trace_reader.h"
#include "util/ends_with.h"
#include "util/terminal_text.h"

namespace gpumemtrace::top {
namespace {

namespace report = gpumemtrace::report;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

// The handler calls of the reader thread, one at a time with the main thread's state() calls.
class LockedModel : public report::TraceHandler {
 public:
  explicit LockedModel(const report::SymbolTable& symbols) : model_(symbols) {}
  void on_header(const report::Header& h) override { with_lock([&] { model_.on_header(h); }); }
  void on_device(const report::DeviceInfo& d) override { with_lock([&] { model_.on_device(d); }); }
  void on_event(const report::Event& e) override { with_lock([&] { model_.on_event(e); }); }
  void on_dropped(uint64_t n) override { with_lock([&] { model_.on_dropped(n); }); }
  void on_capped(const report::Capped& c) override { with_lock([&] { model_.on_capped(c); }); }
  void on_pause(const report::Event& e) override { with_lock([&] { model_.on_pause(e); }); }
  void on_footer(const report::Footer& f) override {
    with_lock([&] { model_.on_footer(f); });
    ended_.store(true, std::memory_order_release);
  }
  report::LiveState state() {
    std::lock_guard<std::mutex> lock(mutex_);
    return model_.state();
  }
  bool ended() const { return ended_.load(std::memory_order_acquire); }

 private:
  template <typename F>
  void with_lock(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f();
  }
  std::mutex mutex_;
  report::LiveModel model_;
  std::atomic<bool> ended_{false};
};

// When the follow source stops: at quit; once the footer is read (nothing follows it); once the
// process (PID mode) is gone.
class Control : public report::FollowControl {
 public:
  Control(const std::atomic<bool>& quit, const LockedModel& model, long pid) : quit_(quit), model_(model), pid_(pid) {}
  bool stop_now() override { return quit_.load(std::memory_order_relaxed); }
  bool keep_waiting() override { return !stop_now() && !model_.ended() && (pid_ <= 0 || tools::process_alive(pid_)); }

 private:
  const std::atomic<bool>& quit_;
  const LockedModel& model_;
  long pid_;
};

// The terminal in the view's state (its own screen, no echo, keys one by one, no cursor) while it
// lives; restored when it ends. Nothing when standard input/output are not a terminal.
class Terminal {
 public:
  explicit Terminal(bool on) : on_(on && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
    if (!on_) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    write_all("\x1b[?1049h\x1b[?25l");
  }
  ~Terminal() {
    if (!on_) return;
    write_all("\x1b[?25h\x1b[?1049l");
    tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // The screen's size; 100 x 30 when it cannot be asked.
  static void size(size_t* width, size_t* height) {
    winsize ws{};
    const bool known = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row;
    *width = known ? ws.ws_col : 100;
    *height = known ? ws.ws_row : 30;
  }
  // Draws `frame` from the top left, each line cleared to its end, the column titles in reverse video.
  static void draw(const report::TopFrame& frame) {
    std::string out = "\x1b[H";
    for (size_t i = 0; i < frame.lines.size(); ++i) {
      if (i) out += "\r\n";
      out += i == frame.table_header ? "\x1b[7m" + frame.lines[i] + "\x1b[0m" : frame.lines[i];
      out += "\x1b[K";
    }
    write_all(out + "\x1b[J");
  }
  static void write_all(const std::string& text) {
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

 private:
  bool on_;
  termios saved_{};
};

struct TopOptions {
  std::string target;       // PID or TRACE
  double interval = 1.0;    // seconds between refreshes
  bool batch = false;
  long iterations = 0;      // batch: refreshes before ending (0: until the trace ends)
  std::string sort = "live";
};

// Applies key `c` to the screen; false for quit.
bool on_key(char c, report::TopScreen& screen, const std::vector<int32_t>& devices, std::string* typing,
            bool* typing_filter) {
  if (*typing_filter) {
    if (c == '\r' || c == '\n') {
      screen.filter = *typing;
      *typing_filter = false;
    } else if (c == 0x1b) {
      *typing_filter = false;
    } else if (c == 0x7f || c == '\b') {
      if (!typing->empty()) typing->pop_back();
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      *typing += c;
    }
    screen.prompt = *typing_filter ? "filter (Enter: apply, Esc: cancel): " + *typing : "";
    return true;
  }
  if (screen.help) return screen.help = false, c != 'q';
  switch (c) {
    case 'q': return false;
    case '1': screen.sort = report::TopSort::Live; break;
    case '2': screen.sort = report::TopSort::Grew; break;
    case '3': screen.sort = report::TopSort::Count; break;
    case 's': screen.sort = static_cast<report::TopSort>((static_cast<int>(screen.sort) + 1) % 3); break;
    case 'l': screen.level = screen.level == report::Level::Block ? report::Level::Allocation : report::Level::Block; break;
    case 'd': {
      // every device -> the first -> ... -> the last -> every device
      auto at = std::find(devices.begin(), devices.end(), screen.device);
      screen.device = at == devices.end() ? (devices.empty() ? report::kAllDevices : devices.front())
                      : at + 1 == devices.end() ? report::kAllDevices : *(at + 1);
      break;
    }
    case '/':
      *typing_filter = true;
      *typing = screen.filter;
      screen.prompt = "filter (Enter: apply, Esc: cancel): " + *typing;
      break;
    case '?': screen.help = true; break;
    default: break;
  }
  return true;
}

// The trace to show: `target` is a trace's path, or a pid (a number that names no file). Sets `*pid`
// to the traced process (0 for a path). "" after a one-line error on standard error.
std::string find_trace(const std::string& target, long* pid) {
  const bool numeric = !target.empty() && target.find_first_not_of("0123456789") == std::string::npos;
  struct stat st;
  if (numeric && stat(target.c_str(), &st) != 0) {
    std::string why;
    const std::string path = tools::trace_of_process(std::atol(target.c_str()), pid, &why);
    if (path.empty()) fprintf(stderr, "gpumemtrace top: %s\n", why.c_str());
    return path;
  }
  if (stat(target.c_str(), &st) != 0) {
    fprintf(stderr, "gpumemtrace top: %s: %s\n", util::printable(target).c_str(), std::strerror(errno));
    return "";
  }
  if (!S_ISREG(st.st_mode)) {
    fprintf(stderr, "gpumemtrace top: %s: not a regular file (expected a trace or a pid)\n",
            util::printable(target).c_str());
    return "";
  }
  return target;
}

int run(const TopOptions& options) {
  long pid = 0;
  const std::string path = find_trace(options.target, &pid);
  if (path.empty()) return 2;

  std::atomic<bool> quit{false}, reader_done{false};
  report::SymbolTable symbols;
  LockedModel model(symbols);
  Control control(quit, model, pid);
  std::mutex error_mutex;
  std::string error;  // the reader's, as one line; set before reader_done
  std::thread reader([&] {
    std::string failed;
    try {
      std::unique_ptr<report::ByteSource> source;
      try {
        source = report::follow_byte_source(path, control);
      } catch (const std::exception& e) {
        throw std::runtime_error(util::printable(path) + ": " + e.what());
      }
      report::read_trace(*source, path, symbols, model);  // its errors name the file and line
    } catch (const std::exception& e) {
      failed = e.what();
    }
    // After a quit the input was cut where it stood: what the reader says of that is no error.
    if (!quit.load()) {
      std::lock_guard<std::mutex> lock(error_mutex);
      error = failed;
    }
    reader_done.store(true, std::memory_order_release);
  });
  auto reader_error = [&] {
    std::lock_guard<std::mutex> lock(error_mutex);
    return error;
  };
  auto finish = [&](int status) {
    quit.store(true);
    reader.join();
    const std::string failed = reader_error();
    if (!failed.empty()) fprintf(stderr, "gpumemtrace top: %s\n", failed.c_str());
    return failed.empty() ? status : 2;
  };

  struct sigaction action {};
  action.sa_handler = on_signal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);

  // The first screen waits (up to one interval) for the trace's header, so that a file that is no
  // trace gets its one-line error and no screen, and the first screen has something to show.
  const auto interval = std::chrono::milliseconds(std::max<long>(50, std::lround(options.interval * 1000)));
  const Clock::time_point start = Clock::now();
  while (!g_interrupted && !reader_done.load(std::memory_order_acquire) && !model.state().started &&
         Clock::now() - start < interval)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!reader_error().empty()) return finish(2);

  const bool interactive = !options.batch && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
  report::TopScreen screen;
  screen.source = util::printable(path);
  screen.sort = options.sort == "grew" ? report::TopSort::Grew
                : options.sort == "count" ? report::TopSort::Count : report::TopSort::Live;
  screen.interval_s = std::chrono::duration<double>(interval).count();
  report::LiveState before, now;
  std::vector<int32_t> devices;
  std::string typing;
  bool typing_filter = false;
  uint64_t last_events = 0;
  Clock::time_point last_news = Clock::now(), next = Clock::now();
  {
    Terminal terminal(interactive);  // restored before the error, if any, is printed
    bool redraw = false;
    while (!g_interrupted) {
      if (Clock::now() >= next) {
        const bool done = reader_done.load(std::memory_order_acquire);
        before = std::move(now);
        now = model.state();
        // One interval after this refresh was due, or after now when it came late (the machine
        // was suspended, say): late refreshes are not made up in a burst.
        next += interval;
        if (next <= Clock::now()) next = Clock::now() + interval;
        ++screen.refresh;
        devices.clear();
        for (const report::LiveDevice& d : now.devices) devices.push_back(d.device);
        if (now.events != last_events) last_events = now.events, last_news = Clock::now();
        const std::string failed = reader_error();
        const long quiet_s = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - last_news).count();
        screen.status = !failed.empty() ? "error: " + failed
                        : done && pid && !now.ended ? "process " + std::to_string(pid) + " is gone; its trace has no footer (killed?)"
                        : !now.ended && quiet_s >= 5 ? "no new event for " + std::to_string(quiet_s) + " s"
                                                     : "";
        redraw = true;
        if (!interactive) {
          screen.width = screen.height = 0;  // a file or a pipe: nothing is cut
          std::string text;
          for (const std::string& line : report::render_top(now, before, screen).lines) text += line + "\n";
          Terminal::write_all(text + "\n");
          redraw = false;
          if (done || (options.iterations > 0 && screen.refresh >= static_cast<uint64_t>(options.iterations))) break;
        }
      }
      if (redraw) {
        Terminal::size(&screen.width, &screen.height);
        Terminal::draw(report::render_top(now, before, screen));
        redraw = false;
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      pollfd in{STDIN_FILENO, POLLIN, 0};
      const int ready = poll(interactive ? &in : nullptr, interactive ? 1 : 0,
                             static_cast<int>(std::clamp<long>(wait, 0, 100)));
      if (ready > 0 && (in.revents & POLLIN)) {
        char keys[64];
        const ssize_t n = ::read(STDIN_FILENO, keys, sizeof keys);
        bool go_on = n != 0;  // 0: the terminal is gone
        for (ssize_t i = 0; i < n && go_on; ++i) go_on = on_key(keys[i], screen, devices, &typing, &typing_filter);
        if (!go_on) break;
        redraw = true;
      }
    }
  }
  return finish(0);
}

}  // namespace

int main(int argc, char** argv) {
  TopOptions options;
  CLI::App app{"", "gpumemtrace top"};
  app.set_help_flag("-h,--help", "this text");
  app.footer("Keys: 1/2/3 sort by live bytes, growth, count; l level; d device; / filter; ? help; q quit.\n"
             "Exit 0; 2 when the trace cannot be found or read. docs/launcher.md, \"gpumemtrace top\".");
  app.add_option("--interval", options.interval, "seconds between refreshes (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  app.add_flag("--batch", options.batch, "a plain screen per refresh on standard output, until the trace ends");
  app.add_option("--iterations", options.iterations, "with --batch: end after N refreshes")->check(CLI::PositiveNumber);
  app.add_option("--sort", options.sort, "live (default), grew or count")->check(CLI::IsMember({"live", "grew", "count"}));
  app.add_option("target", options.target, "PID | TRACE")->required();
  if (const int status = tools::parse_subcommand(app, argc, argv, "gpumemtrace top"); status >= 0) return status;
  return run(options);
}

}  // namespace gpumemtrace::top
