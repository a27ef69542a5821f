// report/outputs/top_view.h — one screen of gpumemtrace top: a LiveState (live_model.h) as lines of
// text, with what grew since the previous refresh.
//
// Pure formatting: no I/O, no clock, no terminal codes (tools/top.cpp draws the lines and styles the
// one at `table_header`). Every line is at most `width` characters (UTF-8 code points).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "report/analyses/live_model.h"

namespace gpumemtrace::report {

enum class TopSort { Live, Grew, Count };

inline constexpr int32_t kAllDevices = -2;

// What the viewer chose (keys), and the screen's size.
struct TopScreen {
  TopSort sort = TopSort::Live;
  Level level = Level::Allocation;  // Allocation (CUDA level) or Block (a caching allocator's blocks)
  int32_t device = kAllDevices;     // a device, or every one
  std::string filter;               // only sites whose label contains this (case-insensitive); "": all
  std::string source;               // the trace's path
  std::string status;               // one line under the header ("" for none): the process ended, ...
  std::string prompt;               // the key line's place, while the filter is typed ("" otherwise)
  bool help = false;                // the keys, instead of the table
  uint64_t refresh = 0;             // this screen's number (the first is 1)
  double interval_s = 1;            // between refreshes
  size_t width = 100;               // characters per line; 0: no limit (batch mode)
  size_t height = 30;               // lines; 0: no limit (batch mode)
};

struct TopFrame {
  std::vector<std::string> lines;
  size_t table_header = static_cast<size_t>(-1);  // the index of the table's column titles
};

// `before`: the state at the previous refresh (its sites give the GREW column; unused on the first
// refresh, screen.refresh 1, which has no GREW figures).
TopFrame render_top(const LiveState& now, const LiveState& before, const TopScreen& screen);

// What the sort keys and the level are called on screen.
const char* top_sort_name(TopSort sort);

// The line a site is shown by: the first line of its stack as the text report shows it (the code the
// user wrote first; stack_view.h), then its callers' names ("f (x.py:3) < g < main"), in `width`
// characters (0: no limit).
std::string site_label(const LiveSite& site, size_t width);

}  // namespace gpumemtrace::report
