// report/cli/options.cpp — gpumem-report's options, defined once with CLI11 (define_options) and
// checked after parsing (finish). The launcher reads the same definition (parse_forwarded_options).
#include "report/cli/options.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "report/allocator_model/settings.h"
#include "util/byte_size.h"
#include "util/edit_distance.h"

namespace gpumemtrace::report {

namespace {

// What CLI11 fills in: the option texts as given, turned into Options by finish() so that every
// error message names the option and the value.
struct RawOptions {
  std::string format, folded, fail_on_leak, fail_on_peak_increase, frames, width, top, jobs, fail_on_oom_within;
  std::string max_batch;
  std::vector<std::string> user_code, library, inputs, diff_inputs, merge_inputs, at_batch, batch_of, export_to;
  bool native = false, no_progress = false, no_default_suppressions = false;
};

// The help text's layout: the two synopsis lines, and flag names without CLI11's "{default}" suffix.
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(34); }
  std::string make_usage(const CLI::App*, std::string) const override {
    return "usage: gpumem-report [OPTIONS] TRACE...        report on traces\n"
           "       gpumem-report diff [OPTIONS] BASE NEW   compare two runs\n"
           "       gpumem-report merge [OPTIONS] REPORT... the cross-rank view of per-process JSON reports\n";
  }
  std::string make_option_name(const CLI::Option* option, bool positional) const override {
    std::string name = CLI::Formatter::make_option_name(option, positional);
    const size_t brace = name.find('{');
    if (brace != std::string::npos) name.erase(brace, name.find('}', brace) - brace + 1);
    return name;
  }
};

struct Parser {
  CLI::App app{"Reports on gpumemtrace traces: leaks, peaks, OOM post-mortems, growth, fragmentation.",
               "gpumem-report"};
  CLI::App* diff = nullptr;
  CLI::App* merge = nullptr;
  RawOptions raw;
  Options options;

  Parser() {
    app.set_help_flag();  // -h/--help is an ordinary flag: main() prints the text and exits 0
    app.formatter(std::make_shared<HelpFormatter>());
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // the last one wins
    app.footer(
        "TRACE: a file (.jsonl, .zst, a PyTorch snapshot pickle), a directory of them, or - for standard\n"
        "input (a pipe or a FIFO; plain or zstd).\n"
        "exit status: 0 fine, 1 a gate failed, 2 bad input or usage, 3 a gate met a cut trace (no verdict)\n");
    app.add_flag("-h,--help", options.help, "this text");
    app.add_flag("--version", options.version, "the version");
    app.add_option("--format", raw.format,
                   "text (default), json, html (one self-contained page), perfetto (Trace Event Format for "
                   "ui.perfetto.dev), folded; diff writes text or json")
        ->type_name("FORMAT");
    app.add_option("--folded", raw.folded, "what --format folded shows: peak (default) or leaks; implies it")
        ->type_name("peak|leaks");
    app.add_option("-o,--output", options.output, "write the report to FILE (not one of the traces)")
        ->type_name("FILE");
    app.add_option("--suppressions", options.suppressions,
                   "leak:PATTERN lines (function, file or module of the allocation site; * wildcard)")
        ->type_name("FILE");
    app.add_flag("--no-default-suppressions", raw.no_default_suppressions,
                 "do not apply the shipped library rules (cuBLAS, cuDNN, NCCL, ... held at exit)");
    // A flag, not an option with an optional value: SIZE attaches only with '=', so the word after a
    // bare --fail-on-leak is a trace, never its size.
    app.add_flag("--fail-on-leak{0}", raw.fail_on_leak,
                 "exit 1 when leaked bytes, or one scope's leak, exceed SIZE (default 0; K/M/G, KiB/MiB/GiB); "
                 "with diff, the new run's leaks")
        ->type_name("[=SIZE]");
    app.add_flag("--count-alive-at-exit", options.count_alive_at_exit,
                 "--fail-on-leak also counts PyTorch blocks still referenced at exit");
    app.add_flag("--fail-on-growth", options.fail_on_growth,
                 "exit 1 when a call site keeps growing (with diff: in the new run)");
    app.add_flag("--allow-incomplete", options.allow_incomplete,
                 "gate cut traces (no footer) on what they recorded instead of exit 3");
    app.add_option("--what-if", options.what_if,
                   "replay PyTorch's allocator under these settings (PYTORCH_CUDA_ALLOC_CONF syntax, over the "
                   "recorded ones; repeatable): predicted peaks, and which OOMs would still happen")
        ->type_name("SETTINGS")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--recorded-settings", options.recorded_settings,
                   "what the traced run's allocator ran under, where the trace cannot tell (e.g. "
                   "per_process_memory_fraction:0.5)")
        ->type_name("SETTINGS");
    app.add_option("--fail-on-oom-within", raw.fail_on_oom_within,
                   "exit 1 when a growing site would fill its device within DURATION at its rate (90s, 30m, 2h, 1d)")
        ->type_name("DURATION");
    app.add_option("--at-batch", raw.at_batch,
                   "predict the peaks at batch size N from the runs given, one per batch size (repeatable; "
                   "docs/what-if.md)")
        ->type_name("N")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_flag("--max-batch{0}", raw.max_batch,
                 "the largest batch that fits, with MARGIN kept free on each device (a size, or a percentage of "
                 "its memory: 5%; default 0)")
        ->type_name("[=MARGIN]");
    app.add_option("--batch-of", raw.batch_of,
                   "the batch size of TRACE, where its marks and file name do not say (repeatable)")
        ->type_name("TRACE=N")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--fail-on-peak-increase", raw.fail_on_peak_increase,
                   "(diff) exit 1 when a peak grows by more than SIZE bytes or PCT percent")
        ->type_name("SIZE|PCT%");
    app.add_option("--frames", raw.frames, "lines per stack in text output (default 12; all = --native)")
        ->type_name("N|all");
    app.add_flag("--native", raw.native, "every frame of each stack as recorded: nothing folded or cut");
    app.add_flag("--full-names", options.stacks.full_names,
                 "C++ names with template arguments and parameter lists");
    app.add_option("--width", raw.width,
                   "characters per stack line (default: the terminal's, else 160; 0 = no limit)")
        ->type_name("N");
    // One value per occurrence (a trace may follow); repeatable, each a comma-separated list.
    app.add_option("--user-code", raw.user_code,
                   "frames to show as your code (function, file or module; * wildcard; repeatable)")
        ->type_name("PATTERN[,...]")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--library", raw.library, "frames to fold as library code (repeatable)")
        ->type_name("PATTERN[,...]")
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_option("--top", raw.top, "entries per section in text output (default 5; 0 = none)")
        ->type_name("N");
    app.add_flag("--top-sites", options.top_sites,
                 "text output: also the call sites by bytes at the peak, total bytes, allocations and "
                 "temporary allocations (always in json and html)");
    app.add_flag("--no-progress", raw.no_progress, "no progress line on stderr (shown only when it is a terminal)");
    app.add_option("-j,--jobs", raw.jobs,
                   "traces analysed at once (default: one per CPU; 1 = one after another); same report either way")
        ->type_name("N");
    app.add_option("--export", raw.export_to,
                   "write every event as rows for SQL engines (zstd JSON Lines in DIR: TABLE is events; "
                   "docs/scale.md), instead of a report")
        ->type_name("events DIR")
        ->expected(2)
        ->allow_extra_args(false);
    app.add_option("TRACE", raw.inputs, "traces to report on, one section per process")->type_name("");
    diff = app.add_subcommand("diff", "compare two runs (peak and leaks by stack); every option works after it");
    diff->fallthrough();  // options given after `diff` are the main command's
    diff->set_help_flag();
    diff->add_option("BASE NEW", raw.diff_inputs, "the two runs (files or directories)")->type_name("");
    merge = app.add_subcommand("merge", "the cross-rank view (peaks, first OOM, common leaks) of per-process JSON "
                                        "reports (--report-per-process); text or json, --top, -o");
    merge->fallthrough();
    merge->set_help_flag();
    merge->add_option("REPORT", raw.merge_inputs, "JSON reports, or folders of *.report.json")->type_name("");
  }

  // "--format", "--output", ...: every long name defined above.
  std::vector<std::string> long_names() const {
    std::vector<std::string> names;
    for (const CLI::Option* option : app.get_options())
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    return names;
  }

  // The options whose value attaches only with '=' (add_flag with a default: `--fail-on-leak[=SIZE]`).
  bool value_attaches_with_equals(const std::string& name) const {
    for (const CLI::Option* option : app.get_options()) {
      const auto& names = option->get_lnames();
      if (std::find(names.begin(), names.end(), name.substr(2)) != names.end())
        return option->get_type_name().rfind("[=", 0) == 0;
    }
    return false;
  }

  // Parses `args` (without the program name); throws UsageError.
  void parse(const std::vector<std::string>& args) {
    check_option_words(args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError& error) {
      throw UsageError(error.what());
    }
  }
};

// A batch size: 1 to 999,999,999.
uint64_t parse_batch(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || value == 0 ||
      value > 999999999) {
    throw UsageError(option + ": expected a batch size from 1 to 999999999, got `" + text + "`");
  }
  return value;
}

// --max-batch's MARGIN: a size, or a percentage of each device's memory below 100.
void parse_margin(const std::string& text, Options& options) {
  if (!text.empty() && text.back() == '%') {
    char* end = nullptr;
    const std::string number = text.substr(0, text.size() - 1);
    const double percent = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !(percent >= 0 && percent < 100)) {
      throw UsageError("--max-batch: expected a margin like 1GiB or 5% (below 100%), got `" + text + "`");
    }
    options.batch_margin_share = percent / 100;
    return;
  }
  const std::optional<uint64_t> size = util::parse_byte_size(text);
  if (!size) throw UsageError("--max-batch: expected a margin like 1GiB or 5% (below 100%), got `" + text + "`");
  options.batch_margin = *size;
}

size_t parse_count(const std::string& text, const std::string& option) {
  char* end = nullptr;
  unsigned long value = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || value > 1000000) {
    throw UsageError(option + ": expected a number, got `" + text + "`");
  }
  return value;
}

uint64_t parse_size_option(const std::string& text, const std::string& option) {
  const std::optional<uint64_t> size = util::parse_byte_size(text);
  if (!size) throw UsageError(option + ": expected a size like 0, 10M or 1.5GiB, got `" + text + "`");
  return *size;
}

OutputFormat parse_format(const std::string& text) {
  if (text == "text") return OutputFormat::Text;
  if (text == "json") return OutputFormat::Json;
  if (text == "html") return OutputFormat::Html;
  if (text == "perfetto") return OutputFormat::Perfetto;
  if (text == "folded") return OutputFormat::Folded;
  throw UsageError("--format: expected text, json, html, perfetto or folded, got `" + text + "`");
}

PeakIncreaseLimit parse_peak_limit(const std::string& text) {
  PeakIncreaseLimit limit;
  if (!text.empty() && text.back() == '%') {
    char* end = nullptr;
    std::string number = text.substr(0, text.size() - 1);
    limit.value = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !(limit.value >= 0)) {
      throw UsageError("--fail-on-peak-increase: expected SIZE or PCT%, got `" + text + "`");
    }
    limit.percent = true;
    return limit;
  }
  limit.value = static_cast<double>(parse_size_option(text, "--fail-on-peak-increase"));
  return limit;
}

// Each PATTERN[,PATTERN...] of `lists`, appended to `patterns`.
void parse_patterns(const std::vector<std::string>& lists, const std::string& option,
                    std::vector<std::string>& patterns) {
  for (const std::string& text : lists) {
    size_t start = 0;
    while (true) {
      size_t comma = text.find(',', start);
      std::string pattern = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (pattern.empty()) throw UsageError(option + ": expected PATTERN[,PATTERN...], got `" + text + "`");
      patterns.push_back(pattern);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
}

// The checks and conversions CLI11 does not do; `traces_follow`: the launcher appends the traces.
Options finish(Parser& parser, bool traces_follow) {
  RawOptions& raw = parser.raw;
  Options& options = parser.options;
  if (options.help || options.version) return options;
  options.diff = parser.diff->parsed();
  options.progress = !raw.no_progress;
  options.default_suppressions = !raw.no_default_suppressions;
  if (!raw.format.empty()) options.format = parse_format(raw.format);
  if (!raw.folded.empty()) {
    if (raw.folded != "peak" && raw.folded != "leaks") {
      throw UsageError("--folded: expected peak or leaks, got `" + raw.folded + "`");
    }
    options.folded = raw.folded == "leaks" ? FoldedSelection::Leaks : FoldedSelection::Peak;
    if (raw.format.empty()) options.format = OutputFormat::Folded;
    if (options.format != OutputFormat::Folded) throw UsageError("--folded only applies to --format folded");
  }
  if (parser.app.count("--fail-on-leak")) {
    options.fail_on_leak = parse_size_option(raw.fail_on_leak, "--fail-on-leak");
  }
  if (!raw.fail_on_peak_increase.empty()) options.fail_on_peak_increase = parse_peak_limit(raw.fail_on_peak_increase);
  if (parser.app.count("--fail-on-oom-within")) {
    options.fail_on_oom_within = parse_duration(raw.fail_on_oom_within);
    if (!options.fail_on_oom_within) {
      throw UsageError("--fail-on-oom-within: expected a duration like 90s, 30m, 2h or 1d, got `" +
                       raw.fail_on_oom_within + "`");
    }
  }
  // The settings are checked here, as PyTorch checks PYTORCH_CUDA_ALLOC_CONF, so that a typo is a usage
  // error before any trace is read.
  allocator_model::AllocatorSettings recorded;
  try {
    recorded = allocator_model::parse_alloc_conf(options.recorded_settings);
  } catch (const allocator_model::SettingsError& error) {
    throw UsageError(std::string("--recorded-settings: ") + error.what());
  }
  for (const std::string& setting : options.what_if) {
    try {
      allocator_model::parse_alloc_conf(setting, recorded);
    } catch (const allocator_model::SettingsError& error) {
      throw UsageError(std::string("--what-if: ") + error.what());
    }
  }
  for (const std::string& text : raw.at_batch) options.at_batch.push_back(parse_batch(text, "--at-batch"));
  if (parser.app.count("--max-batch")) {
    options.max_batch = true;
    parse_margin(raw.max_batch, options);
  }
  for (const std::string& text : raw.batch_of) {
    const size_t equals = text.rfind('=');
    if (equals == std::string::npos || equals == 0) {
      throw UsageError("--batch-of: expected TRACE=N, got `" + text + "`");
    }
    options.batch_of.emplace_back(text.substr(0, equals), parse_batch(text.substr(equals + 1), "--batch-of"));
  }
  if (!options.batch_of.empty() && !options.batch()) throw UsageError("--batch-of needs --at-batch or --max-batch");
  bool frames_given = false;
  options.stacks.native = raw.native;
  if (raw.frames == "all") {
    options.stacks.native = true;
  } else if (parser.app.count("--frames")) {
    options.stacks.max_frames = parse_count(raw.frames, "--frames");
    frames_given = true;
  }
  // --native shows every frame unless --frames N limits them too.
  if (options.stacks.native && !frames_given) options.stacks.max_frames = StackViewOptions::kNoLimit;
  if (parser.app.count("--width")) {
    options.stacks.width = parse_count(raw.width, "--width");
    options.width_given = true;
  }
  parse_patterns(raw.user_code, "--user-code", options.stacks.user_code);
  parse_patterns(raw.library, "--library", options.stacks.library);
  if (parser.app.count("--top")) options.max_items = parse_count(raw.top, "--top");
  if (parser.app.count("--jobs")) {
    options.jobs = parse_count(raw.jobs, "--jobs");
    if (options.jobs == 0) throw UsageError("--jobs: expected a number of at least 1, got `" + raw.jobs + "`");
  }

  if (options.diff && !raw.inputs.empty()) {
    throw UsageError("diff comes before the traces (a trace named diff: write ./diff)");
  }
  options.merge = parser.merge->parsed();
  if (options.merge) {
    if (!raw.inputs.empty()) throw UsageError("merge comes before the reports (a report named merge: write ./merge)");
    if (raw.merge_inputs.empty()) throw UsageError("merge takes REPORT...: JSON reports of processes");
    if (traces_follow || options.diff || options.batch() || !raw.export_to.empty() || options.fail_on_leak ||
        options.fail_on_growth || options.fail_on_oom_within || options.fail_on_peak_increase ||
        !options.what_if.empty() || (options.format != OutputFormat::Text && options.format != OutputFormat::Json)) {
      throw UsageError("merge writes text or json of JSON reports: --format, -o and --top apply, no gate or trace option");
    }
    options.inputs = raw.merge_inputs;
    return options;
  }
  options.inputs = options.diff ? raw.diff_inputs : raw.inputs;
  if (!raw.export_to.empty()) {
    const std::string& table = raw.export_to.front();
    if (table != "events") throw UsageError("--export: expected events DIR, got `" + table + "`");
    if (traces_follow || options.diff || options.batch() || !raw.format.empty() || !options.output.empty() ||
        options.fail_on_leak || options.fail_on_growth || options.fail_on_oom_within || !options.what_if.empty()) {
      throw UsageError("--export writes tables, not a report: give it only traces (no diff, --format, -o, gate, "
                       "--what-if, --at-batch or --max-batch)");
    }
    options.export_dir = raw.export_to.back();
  }
  if (traces_follow) {
    if (options.diff) throw UsageError("diff is not available here: run gpumem-report diff on two runs' traces");
    if (!options.inputs.empty()) throw UsageError("unexpected argument `" + options.inputs.front() + "`");
    if (options.fail_on_peak_increase) throw UsageError("--fail-on-peak-increase only applies to diff");
    if (options.batch()) {
      throw UsageError("--at-batch and --max-batch compare runs at different batch sizes: run gpumem-report on their traces");
    }
    return options;
  }
  if (options.diff && options.format != OutputFormat::Text && options.format != OutputFormat::Json) {
    throw UsageError("diff writes text or json only");
  }
  if (options.diff && options.inputs.size() != 2) throw UsageError("diff takes BASE and NEW");
  if (options.diff && options.batch()) throw UsageError("--at-batch and --max-batch do not apply to diff");
  if (options.batch() && (options.format == OutputFormat::Perfetto || options.format == OutputFormat::Folded)) {
    throw UsageError("--at-batch and --max-batch write text, json or html");
  }
  if (options.diff && (options.fail_on_oom_within || !options.what_if.empty())) {
    throw UsageError(options.what_if.empty() ? "--fail-on-oom-within does not apply to diff" : "--what-if does not apply to diff");
  }
  if (!options.diff && options.inputs.empty()) throw UsageError("no trace given");
  if (!options.diff && options.fail_on_peak_increase) {
    throw UsageError("--fail-on-peak-increase only applies to diff");
  }
  return options;
}

}  // namespace

std::optional<double> parse_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double total = 0;
  size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    char* end = nullptr;
    const double value = std::strtod(text.c_str() + i, &end);
    const size_t used = static_cast<size_t>(end - (text.c_str() + i));
    if (used == 0 || !(value >= 0) || text[i] == '+' || text[i] == '-') return std::nullopt;
    i += used;
    double unit = 1;
    if (i < text.size()) {
      switch (text[i]) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: return std::nullopt;
      }
      ++i;
    } else if (any) {
      return std::nullopt;  // "1h30": a number without its unit after a unit
    }
    total += value * unit;
    any = true;
  }
  return total;
}

// At most this many edits between a misspelt option and the one suggested (as for the recorder's
// variables: interpose/recorder/config.cpp).
constexpr size_t kMaxSuggestionEdits = 2;

void check_option_words(const std::vector<std::string>& args, const std::vector<std::string>& also_known) {
  const Parser parser;
  std::vector<std::string> known = parser.long_names();
  known.insert(known.end(), also_known.begin(), also_known.end());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      const std::string* nearest = util::nearest_name(name, known, kMaxSuggestionEdits);
      throw UsageError("unknown option " + name + (nearest ? "; did you mean " + *nearest + "?" : std::string()));
    }
    if (equals == arg.size() - 1) throw UsageError(name + ": missing value");
    if (equals == std::string::npos && i + 1 < args.size() && parser.value_attaches_with_equals(name) &&
        util::parse_byte_size(args[i + 1]) && access(args[i + 1].c_str(), F_OK) != 0) {
      throw UsageError(name + " takes its size after '=': " + name + "=" + args[i + 1]);
    }
  }
}

Options parse_options(const std::vector<std::string>& args) {
  Parser parser;
  parser.parse(args);
  return finish(parser, false);
}

Options parse_forwarded_options(const std::vector<std::string>& args) {
  Parser parser;
  parser.parse(args);
  return finish(parser, true);
}

std::string help_text() {
  Parser parser;
  return parser.app.help();
}

}  // namespace gpumemtrace::report
