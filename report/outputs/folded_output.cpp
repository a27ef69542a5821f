// report/outputs/folded_output.cpp — folded stacks from the report model.
#include "report/outputs/folded_output.h"

#include <algorithm>
#include <unordered_map>

namespace gpumemtrace::report {

std::string folded_frame(const LogicalFrame& frame) {
  std::string text = frame.function.empty() ? "??" : frame.function;
  if (!frame.file.empty()) {
    text += " (" + frame.file + (frame.line ? ":" + std::to_string(frame.line) : std::string()) + ")";
  } else if (!frame.module.empty()) {
    text += " (" + frame.module.substr(frame.module.rfind('/') + 1) + ")";
  }
  std::replace_if(text.begin(), text.end(), [](char c) { return c == ';' || c == '\n' || c == '\r'; }, ' ');
  return text;
}

namespace {

// Folded lines in first-seen order, equal stacks merged.
class FoldedLines {
 public:
  void add(const std::string& prefix, const Stack& stack, uint64_t bytes) {
    if (bytes == 0) return;
    std::string line = prefix;
    for (auto frame = stack.rbegin(); frame != stack.rend(); ++frame) {  // stacks are innermost first
      if (!line.empty()) line += ';';
      line += folded_frame(*frame);
    }
    if (stack.empty()) line += line.empty() ? "[no stack]" : ";[no stack]";
    auto [it, added] = index_.emplace(line, lines_.size());
    if (added) lines_.push_back({line, 0});
    lines_[it->second].second += bytes;
  }
  void add_named(const std::string& prefix, const std::string& name, uint64_t bytes) {
    LogicalFrame frame;
    frame.function = name;
    add(prefix, Stack{frame}, bytes);
  }
  void write(std::ostream& out) const {
    for (const auto& [line, bytes] : lines_) out << line << ' ' << bytes << '\n';
  }

 private:
  std::vector<std::pair<std::string, uint64_t>> lines_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace

void write_folded(std::ostream& out, const std::vector<ProcessReport>& reports, FoldedSelection selection) {
  FoldedLines lines;
  for (const ProcessReport& r : reports) {
    const std::string process = reports.size() > 1 ? "pid " + std::to_string(r.header.pid) : "";
    auto prefix = [&](int32_t device) {
      if (r.devices.size() <= 1) return process;
      return (process.empty() ? "" : process + ";") + "GPU " + std::to_string(device);
    };
    if (selection == FoldedSelection::Leaks) {
      for (const LeakGroup& leak : r.leaks) {
        if (!leak.suppressed) lines.add(prefix(leak.device), leak.stack, leak.bytes);
      }
      continue;
    }
    for (const PeakReport& peak : r.peaks) {
      // With block data, the blocks (not the allocator's segments) say who holds the memory.
      const PeakLevel& level = peak.has_blocks ? peak.allocated : peak.reserved;
      for (const StackBytes& culprit : level.culprits) lines.add(prefix(peak.device), culprit.stack, culprit.bytes);
      lines.add_named(prefix(peak.device), "[other stacks]", level.other_bytes);
    }
  }
  lines.write(out);
}

}  // namespace gpumemtrace::report
