// report/outputs/top_view.cpp — see top_view.h.
#include "report/outputs/top_view.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <tuple>

#include "report/outputs/stack_view.h"
#include "report/outputs/units.h"
#include "util/terminal_text.h"

namespace gpumemtrace::report {
namespace {

using SiteKey = std::tuple<int32_t, Level, SiteId>;

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// "+1.0 MiB", "-512 B", "" for no change.
std::string signed_bytes(int64_t delta) { return delta ? format_signed_bytes(delta) : ""; }

std::string right(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

// At most `width` code points (0: no limit).
std::string fit(const std::string& text, size_t width) { return width ? prefix_of(text, width) : text; }

std::string ending(const LiveState& s) {
  if (!s.ended) return "running";
  const std::string status = s.footer.exit_status >= 0 ? " with status " + std::to_string(s.footer.exit_status) : "";
  switch (s.footer.end) {
    case format::End::Exit: return "ended: exited" + status;
    case format::End::QuickExit: return "ended: _exit" + status;
    case format::End::Signal: return "ended: killed by " + signal_name(s.footer.signal);
    case format::End::Exec: return "ended: replaced by exec";
    case format::End::Dump: return "a dump (the trace up to it)";
    case format::End::Unknown: break;
  }
  return "ended";
}

// What is shown first, as the width may cut the line: the process, whether it still runs, its command.
std::string header_line(const LiveState& s, const TopScreen& screen) {
  if (!s.started) return "gpumemtrace top: " + screen.source + " (waiting for the trace's first line)";
  std::string line = "gpumemtrace top: pid " + std::to_string(s.header.pid);
  if (!s.header.host.empty()) line += " on " + util::printable(s.header.host);
  line += ", " + ending(s);
  std::string cmd;
  for (const std::string& arg : s.header.cmdline) cmd += (cmd.empty() ? "" : " ") + util::printable(arg);
  return line + (cmd.empty() ? "" : " \u2014 " + cmd);
}

std::string counts_line(const LiveState& s, const TopScreen& screen) {
  char every[32];
  snprintf(every, sizeof every, "%g", screen.interval_s);
  std::string line = "refresh " + std::to_string(screen.refresh) + " (every " + every + " s): " + std::to_string(s.events) + " events over " +
                     format_seconds(s.last_time_ns > s.first_time_ns ? s.last_time_ns - s.first_time_ns : 0) + "; " +
                     std::to_string(s.ooms) + (s.ooms == 1 ? " OOM" : " OOMs");
  if (s.paused) line += "; stacks paused (gpumemtrace.stop())";
  if (s.capped) line += "; the trace reached its size cap: figures stopped there";
  if (s.dropped) line += "; " + std::to_string(s.dropped) + " events dropped: figures may be off";
  return line;
}

// `before`: the previous refresh's state; null on the first refresh (nothing to compare with).
std::string device_line(const LiveDevice& d, const LiveState* before) {
  int64_t grew = static_cast<int64_t>(d.reserved);  // a device new since the last refresh grew from 0
  if (before) {
    for (const LiveDevice& b : before->devices)
      if (b.device == d.device) grew -= static_cast<int64_t>(b.reserved);
  }
  std::string line = "device " + std::to_string(d.device);
  if (!d.name.empty()) line += " (" + util::printable(d.name) + ")";
  line += ": " + format_bytes(d.reserved) + " reserved";
  if (before && grew) line += " (" + signed_bytes(grew) + ")";
  if (d.has_blocks) line += ", " + format_bytes(d.allocated) + " in blocks";
  if (d.total) line += " of " + format_bytes(d.total);
  line += "; peak " + format_bytes(d.peak_reserved);
  if (d.ooms) line += "; " + std::to_string(d.ooms) + (d.ooms == 1 ? " OOM" : " OOMs");
  return line;
}

std::vector<std::string> help_lines() {
  return {"keys:",
          "  1 / 2 / 3   sort by live bytes / by what grew since the last refresh / by live allocations",
          "  s           the next sort",
          "  l           level: CUDA allocations, or a caching allocator's blocks (PyTorch's tensors)",
          "  d           the next device, then every device",
          "  /           filter: only sites whose line contains the text typed (Enter; empty: all)",
          "  ?           this help (any key goes back)",
          "  q, Ctrl-C   quit"};
}

}  // namespace

const char* top_sort_name(TopSort sort) {
  switch (sort) {
    case TopSort::Live: return "live bytes";
    case TopSort::Grew: return "grew";
    case TopSort::Count: return "allocations";
  }
  return "";
}

std::string site_label(const LiveSite& site, size_t width) {
  StackViewOptions options;
  options.max_frames = 6;
  options.width = 0;
  const std::vector<std::string> lines = stack_lines(site.stack ? *site.stack : Stack{}, options, 0);
  if (lines.empty()) return "(no stack recorded)";
  // The first line whole; its callers by name only, so that sites reached through one helper
  // (a cuda_malloc wrapper, say) are told apart on one line.
  std::string label = lines.front();
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].rfind("...", 0) == 0) break;     // "... N more frames"
    if (lines[i].rfind("[", 0) == 0) continue;    // a library's folded frames, called by the first line
    label += " < " + lines[i].substr(0, lines[i].find(" ("));
  }
  return fit(label, width);
}

TopFrame render_top(const LiveState& now, const LiveState& before, const TopScreen& screen) {
  TopFrame frame;
  std::vector<std::string>& out = frame.lines;
  // GREW compares with the previous refresh; the first has none (a site new since then grew from 0).
  const bool first = screen.refresh <= 1;
  out.push_back(header_line(now, screen));
  if (now.started) out.push_back("trace: " + screen.source);
  out.push_back(counts_line(now, screen));
  if (!screen.status.empty()) out.push_back(screen.status);
  for (const LiveDevice& d : now.devices)
    if (screen.device == kAllDevices || screen.device == d.device) out.push_back(device_line(d, first ? nullptr : &before));
  out.push_back("");
  if (screen.help) {
    for (const std::string& line : help_lines()) out.push_back(line);
  } else {
    std::map<SiteKey, uint64_t> was;
    for (const LiveSite& s : before.sites) was[{s.device, s.level, s.site}] = s.bytes;
    struct Row {
      const LiveSite* site;
      int64_t grew;
      std::string label;
    };
    const bool all_devices = screen.device == kAllDevices;
    const size_t label_width = screen.width > 40 ? screen.width - (all_devices ? 40 : 34) : 0;
    const std::string filter = lower(screen.filter);
    std::vector<Row> rows;
    uint64_t level_bytes = 0;
    for (const LiveSite& s : now.sites) {
      if (s.level != screen.level || (!all_devices && s.device != screen.device)) continue;
      const auto old = was.find({s.device, s.level, s.site});
      const int64_t grew = static_cast<int64_t>(s.bytes) - static_cast<int64_t>(old == was.end() ? 0 : old->second);
      std::string label = site_label(s, 0);  // filtered whole, shown cut to its column
      if (!filter.empty() && lower(label).find(filter) == std::string::npos) continue;
      label = fit(label, label_width);
      level_bytes += s.bytes;  // of the sites shown: with a filter, theirs only
      rows.push_back(Row{&s, grew, std::move(label)});
    }
    auto key = [&](const Row& r) -> int64_t {
      switch (screen.sort) {
        case TopSort::Live: return static_cast<int64_t>(r.site->bytes);
        case TopSort::Grew: return r.grew;
        case TopSort::Count: return static_cast<int64_t>(r.site->count);
      }
      return 0;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      if (key(a) != key(b)) return key(a) > key(b);
      if (a.site->bytes != b.site->bytes) return a.site->bytes > b.site->bytes;
      return a.label < b.label;
    });
    out.push_back(std::string(screen.level == Level::Block ? "caching-allocator blocks" : "CUDA allocations") +
                  " by call site: " + std::to_string(rows.size()) + (rows.size() == 1 ? " site, " : " sites, ") +
                  format_bytes(level_bytes) + " live" +
                  (all_devices ? "" : " on device " + std::to_string(screen.device)) + "; sorted by " +
                  top_sort_name(screen.sort) +
                  (filter.empty() ? "" : "; filter \"" + util::printable(screen.filter) + "\""));
    frame.table_header = out.size();
    out.push_back(right("LIVE", 11) + right("COUNT", 9) + right("GREW", 12) + (all_devices ? "  DEV " : "") + "  SITE");
    const size_t room = screen.height ? (screen.height > out.size() + 1 ? screen.height - out.size() - 1 : 0) : rows.size();
    for (size_t i = 0; i < rows.size() && i < room; ++i) {
      const Row& r = rows[i];
      std::string line = right(format_bytes(r.site->bytes), 11) + right(std::to_string(r.site->count), 9) +
                         right(first ? "" : signed_bytes(r.grew), 12);
      if (all_devices) line += right(std::to_string(r.site->device), 5) + " ";
      out.push_back(line + "  " + r.label);
    }
    if (rows.size() > room && room > 0 && screen.height) out.back() = "... " + std::to_string(rows.size() - room + 1) + " more sites";
  }
  if (screen.height) {
    while (out.size() + 1 < screen.height) out.push_back("");
    if (out.size() + 1 > screen.height) out.resize(screen.height - 1);
  }
  out.push_back(!screen.prompt.empty() ? screen.prompt
                                       : "q quit  1/2/3 sort (live, grew, count)  l level  d device  / filter  ? help");
  for (std::string& line : out) line = fit(line, screen.width);
  return frame;
}

}  // namespace gpumemtrace::report
