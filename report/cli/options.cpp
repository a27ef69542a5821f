#include "report/cli/options.h"

#include <cstdlib>
#include <stdexcept>

#include "report/outputs/units.h"

namespace gpumemtrace::report {

const char* const kUsage =
    "usage: gpumem-report [OPTIONS] TRACE...        report on traces (files, .zst, directories,\n"
    "                                               PyTorch snapshot pickles)\n"
    "       gpumem-report diff [OPTIONS] BASE NEW   compare two runs (peak and leaks by stack)\n"
    "\n"
    "options:\n"
    "  --format FORMAT             text (default), json, html (one self-contained page),\n"
    "                              perfetto (Trace Event Format for ui.perfetto.dev), folded\n"
    "  --folded=peak|leaks         what --format folded shows (default peak; implies it)\n"
    "  -o, --output FILE           write the report to FILE\n"
    "  --suppressions FILE         leak:PATTERN lines (function, file or module; * wildcard)\n"
    "  --no-default-suppressions   do not apply the shipped library rules (cuBLAS, cuDNN, NCCL, ... held at exit)\n"
    "  --fail-on-leak[=SIZE]       exit 1 when leaked bytes, or one scope's leak, exceed SIZE (default 0;\n"
    "                              K/M/G, KiB/MiB/GiB)\n"
    "  --count-alive-at-exit       --fail-on-leak also counts PyTorch blocks still referenced at exit\n"
    "  --fail-on-growth            exit 1 when a call site keeps growing\n"
    "  --fail-on-peak-increase=SIZE|PCT%   (diff) exit 1 when a peak grows by more than that\n"
    "  --allow-incomplete          gate cut traces (no footer) on what they recorded instead of exit 3\n"
    "  --frames N|all              lines per stack in text output (default 12; all = --native)\n"
    "  --native                    every frame of each stack as recorded: nothing folded or cut\n"
    "  --full-names                C++ names with template arguments and parameter lists\n"
    "  --width N                   characters per stack line (default: the terminal's, else 160;\n"
    "                              0 = no limit)\n"
    "  --user-code PATTERN[,...]   frames to show as your code (function, file or module; * wildcard)\n"
    "  --library PATTERN[,...]     frames to fold as library code\n"
    "  --top N                     entries per section in text output (default 5)\n"
    "  --no-progress               no progress line on stderr (shown only when it is a terminal)\n"
    "  -h, --help                  this text\n"
    "exit status: 0 fine, 1 a gate failed, 2 bad input or usage, 3 a gate met a cut trace (no verdict)\n";

namespace {

size_t parse_count(const std::string& text, const std::string& option) {
  char* end = nullptr;
  unsigned long value = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value > 1000000) {
    throw std::invalid_argument(option + ": expected a number, got `" + text + "`");
  }
  return value;
}

uint64_t parse_size_option(const std::string& text, const std::string& option) {
  std::optional<uint64_t> size = parse_size(text);
  if (!size) throw std::invalid_argument(option + ": expected a size like 0, 10M or 1.5GiB, got `" + text + "`");
  return *size;
}

OutputFormat parse_format(const std::string& text) {
  if (text == "text") return OutputFormat::Text;
  if (text == "json") return OutputFormat::Json;
  if (text == "html") return OutputFormat::Html;
  if (text == "perfetto") return OutputFormat::Perfetto;
  if (text == "folded") return OutputFormat::Folded;
  throw std::invalid_argument("--format: expected text, json, html, perfetto or folded, got `" + text + "`");
}

PeakIncreaseLimit parse_peak_limit(const std::string& text) {
  PeakIncreaseLimit limit;
  if (!text.empty() && text.back() == '%') {
    char* end = nullptr;
    std::string number = text.substr(0, text.size() - 1);
    limit.value = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !(limit.value >= 0)) {
      throw std::invalid_argument("--fail-on-peak-increase: expected SIZE or PCT%, got `" + text + "`");
    }
    limit.percent = true;
    return limit;
  }
  limit.value = static_cast<double>(parse_size_option(text, "--fail-on-peak-increase"));
  return limit;
}

// PATTERN[,PATTERN...] appended to `patterns`.
void parse_patterns(const std::string& text, const std::string& option, std::vector<std::string>& patterns) {
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string pattern = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (pattern.empty()) throw std::invalid_argument(option + ": expected PATTERN[,PATTERN...], got `" + text + "`");
    patterns.push_back(pattern);
    if (comma == std::string::npos) return;
    start = comma + 1;
  }
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Options options;
  bool frames_given = false;
  bool format_given = false, folded_given = false;
  size_t i = 0;
  auto value_of = [&](const std::string& arg, const std::string& name) -> std::string {
    if (arg.size() > name.size() && arg[name.size()] == '=') return arg.substr(name.size() + 1);
    if (i + 1 >= args.size()) throw std::invalid_argument(name + ": missing value");
    return args[++i];
  };
  auto is = [](const std::string& arg, const std::string& name) {
    return arg == name || (arg.size() > name.size() && arg.compare(0, name.size() + 1, name + "=") == 0);
  };
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else if (is(arg, "--format")) {
      options.format = parse_format(value_of(arg, "--format"));
      format_given = true;
    } else if (is(arg, "--folded")) {
      std::string what = value_of(arg, "--folded");
      if (what != "peak" && what != "leaks") throw std::invalid_argument("--folded: expected peak or leaks, got `" + what + "`");
      options.folded = what == "leaks" ? FoldedSelection::Leaks : FoldedSelection::Peak;
      folded_given = true;
    } else if (arg == "--no-progress") {
      options.progress = false;
    } else if (arg == "-o" || is(arg, "--output")) {
      options.output = value_of(arg, arg == "-o" ? "-o" : "--output");
    } else if (is(arg, "--suppressions")) {
      options.suppressions = value_of(arg, "--suppressions");
    } else if (arg == "--fail-on-leak") {
      options.fail_on_leak = 0;  // the optional SIZE only attaches with '=': a trace name may follow
    } else if (is(arg, "--fail-on-leak")) {
      options.fail_on_leak = parse_size_option(value_of(arg, "--fail-on-leak"), "--fail-on-leak");
    } else if (arg == "--no-default-suppressions") {
      options.default_suppressions = false;
    } else if (arg == "--count-alive-at-exit") {
      options.count_alive_at_exit = true;
    } else if (arg == "--fail-on-growth") {
      options.fail_on_growth = true;
    } else if (arg == "--allow-incomplete") {
      options.allow_incomplete = true;
    } else if (is(arg, "--fail-on-peak-increase")) {
      options.fail_on_peak_increase = parse_peak_limit(value_of(arg, "--fail-on-peak-increase"));
    } else if (is(arg, "--frames")) {
      std::string frames = value_of(arg, "--frames");
      if (frames == "all") {
        options.stacks.native = true;
      } else {
        options.stacks.max_frames = parse_count(frames, "--frames");
        frames_given = true;
      }
    } else if (arg == "--native") {
      options.stacks.native = true;
    } else if (arg == "--full-names") {
      options.stacks.full_names = true;
    } else if (is(arg, "--width")) {
      options.stacks.width = parse_count(value_of(arg, "--width"), "--width");
      options.width_given = true;
    } else if (is(arg, "--user-code")) {
      parse_patterns(value_of(arg, "--user-code"), "--user-code", options.stacks.user_code);
    } else if (is(arg, "--library")) {
      parse_patterns(value_of(arg, "--library"), "--library", options.stacks.library);
    } else if (is(arg, "--top")) {
      options.max_items = parse_count(value_of(arg, "--top"), "--top");
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw std::invalid_argument("unknown option `" + arg + "`");
    } else if (arg == "diff" && options.inputs.empty() && !options.diff) {
      options.diff = true;  // the subcommand: the first positional argument, options may precede it
    } else {
      options.inputs.push_back(arg);
    }
  }
  // --native shows every frame unless --frames N limits them too.
  if (options.stacks.native && !frames_given) options.stacks.max_frames = StackViewOptions::kNoLimit;
  if (options.help) return options;
  if (folded_given && !format_given) options.format = OutputFormat::Folded;
  if (folded_given && options.format != OutputFormat::Folded) throw std::invalid_argument("--folded only applies to --format folded");
  if (options.diff && options.format != OutputFormat::Text && options.format != OutputFormat::Json) {
    throw std::invalid_argument("diff writes text or json only");
  }
  if (options.diff && options.inputs.size() != 2) throw std::invalid_argument("diff takes BASE and NEW");
  if (!options.diff && options.inputs.empty()) throw std::invalid_argument("no trace given");
  if (!options.diff && options.fail_on_peak_increase) {
    throw std::invalid_argument("--fail-on-peak-increase only applies to diff");
  }
  return options;
}

}  // namespace gpumemtrace::report
