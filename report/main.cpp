// report/main.cpp — gpumem-report, the offline analyzer. Pipeline: reader/ (lines -> validated records) ->
// analyses/ (one streaming pass per trace -> ProcessReport) -> outputs/ (text, JSON, HTML, Perfetto,
// folded stacks) -> cli/ gates.
// Exit status: 0 fine, 1 a gate failed, 2 bad input or usage, 3 a gate met a cut trace (no verdict).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>

#include "report/analyses/analyze.h"
#include "report/analyses/diff.h"
#include "report/cli/batch_inputs.h"
#include "report/cli/gates.h"
#include "report/cli/inputs.h"
#include "report/cli/jobs.h"
#include "report/cli/merge_inputs.h"
#include "report/cli/options.h"
#include "report/cli/progress.h"
#include "report/outputs/batch_output.h"
#include "report/outputs/export_events.h"
#include "report/outputs/folded_output.h"
#include "report/outputs/html_output.h"
#include "report/outputs/json_output.h"
#include "report/outputs/merge_output.h"
#include "report/outputs/perfetto_output.h"
#include "report/outputs/text_output.h"
#include "util/terminal_text.h"

using namespace gpumemtrace::report;
using gpumemtrace::util::printable;
using gpumemtrace::util::TerminalStreambuf;

namespace {

constexpr int kExitGate = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitIncomplete = 3;

// JSON text of a report: file names, frames and labels come from the trace and need not be UTF-8;
// invalid bytes become U+FFFD instead of an exception.
std::string dump_json(const nlohmann::json& json) {
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `folding` (not for diff, which compares every process): a run of many processes keeps only the most
// telling reports in full (process_groups.h); its inspect judges every report before.
AnalyzedInputs analyze_all(const std::vector<TraceInput>& inputs, const Suppressions& suppressions,
                           const Options& options, const Folding* folding = nullptr) {
  AnalyzedInputs analyzed;
  {
    ProgressLine progress(STDERR_FILENO);
    AnalysisRequest what_if{options.what_if, options.recorded_settings, !options.diff};
    // Only the page draws the timeline. Set by name: a field added before it in AnalysisRequest
    // (replay_recorded) once took this value, and every format paid for the timeline.
    what_if.allocation_timeline = options.format == OutputFormat::Html;
    // The page shows the batch what-if's rows in the recorded run's what-if table: it is made even
    // when nothing else asks for it.
    what_if.replay_recorded = options.batch() && options.format == OutputFormat::Html;
    analyzed = analyze_inputs(inputs, suppressions, options.progress ? &progress : nullptr,
                              options.jobs ? options.jobs : default_jobs(), what_if, folding);
  }  // the line is cleared here, before any warning or report is written
  // Empty traces among several: a warning each, not an error.
  for (const std::string& warning : analyzed.skipped) std::cerr << "gpumem-report: warning: " << printable(warning) << "\n";
  if (analyzed.reports.empty()) throw std::runtime_error("no trace to report on: every trace given is empty");
  return analyzed;
}

void write_report(std::ostream& out, const std::vector<ProcessReport>& reports, const ProcessGroups& groups,
                  const Options& options, TextOptions text, const BatchReport* batch) {
  text.groups = &groups;
  switch (options.format) {
    case OutputFormat::Text:
      if (batch) write_batch_text(out, *batch, text);  // the question asked, before each run's own report
      write_text(out, reports, text);
      break;
    case OutputFormat::Json: {
      nlohmann::json document = reports_to_json(reports, &groups);
      if (batch) document["batch"] = batch_to_json(*batch);
      out << dump_json(document) << "\n";
      break;
    }
    case OutputFormat::Html: write_html(out, reports, &groups); break;
    case OutputFormat::Perfetto: out << dump_json(perfetto_trace(reports)) << "\n"; break;
    case OutputFormat::Folded: write_folded(out, reports, options.folded); break;
  }
  // These two have no place for the groups: say what they leave out.
  if (groups.processes() && (options.format == OutputFormat::Perfetto || options.format == OutputFormat::Folded)) {
    std::cerr << "gpumem-report: warning: " << groups.processes() << " of " << reports.size() + groups.processes()
              << " processes are not in this output: a run of more than " << kMaxProcessesInFull
              << " processes keeps the " << reports.size()
              << " that tell the most (--format text, json or html list the others by executable and rank)\n";
  }
}

// The width of the terminal on `fd`, or 0 when it is not a terminal (or does not say).
size_t terminal_columns(int fd) {
  struct winsize size {};
  if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

// True when `fd` is a pipe or socket whose reading end is closed (`gpumem-report ... | head` after head
// exited): the report has nobody left to show it to, which is not an error to report (shells say
// nothing when a program in a pipeline dies of SIGPIPE either). Asked of the descriptor, not of errno,
// which later calls may have changed since the write that failed.
bool reader_gone(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
  struct pollfd p = {fd, POLLOUT, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0;
}

// `merge REPORT...`: JSON reports in, the cross-rank view out; no trace is read.
void run_merge(const Options& options, std::ostream& out) {
  const MergeInputs inputs = read_merge_inputs(options.inputs);
  const MergedRanks merged = merge_ranks(inputs.processes);
  if (options.format == OutputFormat::Json) out << dump_json(merge_to_json(merged, inputs.processes, inputs.warnings)) << "\n";
  else write_merge_text(out, merged, inputs.processes, inputs.warnings, options.max_items, options.stacks);
}

int run(const Options& options) {
  Suppressions suppressions;
  if (!options.suppressions.empty()) suppressions = Suppressions::load(options.suppressions);
  if (options.default_suppressions) suppressions.merge(Suppressions::library_defaults());
  // Every input is resolved (streams read to their end) before the output is opened: -o naming one of
  // them is refused before it could be emptied. For diff, one group per run.
  InputSet input_set;
  std::vector<std::vector<TraceInput>> groups(options.diff ? 2 : 1);
  std::vector<std::string> input_paths = options.inputs;
  for (size_t i = 0; i < options.inputs.size() && !options.merge; ++i) {
    std::vector<TraceInput> resolved = input_set.resolve(options.inputs[i]);
    if (options.batch() && resolved.size() != 1) {
      throw BatchError(options.inputs[i] + ": holds " + std::to_string(resolved.size()) +
                       " traces: --at-batch and --max-batch take one trace per run");
    }
    for (TraceInput& input : resolved) {
      if (input.spooled.empty()) input_paths.push_back(input.path);
      groups[options.diff ? i : 0].push_back(std::move(input));
    }
  }
  if (!options.export_dir.empty()) {
    std::vector<ExportInput> exported;
    for (const TraceInput& input : groups[0]) exported.push_back({input.path, input.name});
    const ExportResult result = export_events(exported, options.export_dir, suppressions,
                                              options.jobs ? options.jobs : default_jobs());
    for (const std::string& warning : result.warnings) std::cerr << "gpumem-report: " << printable(warning) << "\n";
    std::cerr << "gpumem-report: exported " << result.events << " events, " << result.stacks << " stacks and "
              << result.frames << " frames of " << result.traces << (result.traces == 1 ? " trace" : " traces")
              << " to " << printable(options.export_dir) << "\n";
    return 0;
  }
  std::ofstream file;
  if (!options.output.empty()) {
    std::vector<FileId> sources = input_set.stream_sources();
    struct stat st;
    if (!options.suppressions.empty() && ::stat(options.suppressions.c_str(), &st) == 0)
      sources.push_back({st.st_dev, st.st_ino, "the suppressions file (--suppressions)"});
    refuse_output_among_inputs(options.output, input_paths, sources);
    // A new report file is private (0600, less the umask's bits), as a trace is: it shows the traced
    // programs' command lines, paths and stacks. An existing one keeps its mode (as with `>`).
    // O_NONBLOCK: never waits here for a FIFO's reader (the stream's open below does, as it always did).
    const int fd = open(options.output.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd >= 0) close(fd);
    file.open(options.output);
    if (!file) throw std::runtime_error(options.output + ": cannot write");
  }
  std::ostream& destination = options.output.empty() ? std::cout : file;
  // Text for people (text, folded, a diff's text) reaches a terminal or a CI log: control characters
  // from the trace are escaped on the way (util/terminal_text.h). JSON, HTML and Perfetto escape their own.
  const bool for_people = options.format == OutputFormat::Text || options.format == OutputFormat::Folded;
  TerminalStreambuf escaped(destination.rdbuf());
  std::ostream filtered(&escaped);
  std::ostream& out = for_people ? filtered : destination;
  TextOptions text{options.stacks, options.max_items};
  text.top_sites = options.top_sites;
  if (!options.width_given && options.output.empty()) {
    if (size_t columns = terminal_columns(STDOUT_FILENO)) text.stacks.width = columns;
  }
  std::vector<std::string> failures, incomplete;
  if (options.merge) {
    run_merge(options, out);
  } else if (options.diff) {
    std::vector<ProcessReport> base = analyze_all(groups[0], suppressions, options).reports;
    std::vector<ProcessReport> current = analyze_all(groups[1], suppressions, options).reports;
    DiffReport diff = diff_reports(base, current);
    if (options.format == OutputFormat::Json) out << dump_json(diff_to_json(diff)) << "\n";
    else write_diff_text(out, diff, text);
    failures = check_diff_gates(diff, current, options);
  } else {
    // Every report is judged, and its warnings kept, as it is made: a run of many processes keeps
    // only some in full. Input order, as one after another.
    std::vector<std::vector<std::string>> judged_failures(groups[0].size()), judged_incomplete(groups[0].size()),
        judged_warnings(groups[0].size());
    Folding folding;
    folding.inspect = [&](size_t i, ProcessReport& report) {
      std::vector<ProcessReport> one;
      one.push_back(std::move(report));
      judged_failures[i] = check_gates(one, options);
      judged_incomplete[i] = check_incomplete(one, options);
      report = std::move(one.front());
      // The text report prints the warnings of the processes it shows; those summed in groups, here.
      for (const std::string& warning : report.warnings)
        judged_warnings[i].push_back(printable(report.file) + ": warning: " + printable(warning));
    };
    std::optional<BatchReport> batch;
    if (options.batch()) batch = batch_what_if_of(groups[0], options);
    AnalyzedInputs analyzed = analyze_all(groups[0], suppressions, options, &folding);
    if (batch && options.format == OutputFormat::Html) add_batch_rows(*batch, analyzed.reports);
    // The text report prints the warnings of the processes it shows in full itself.
    std::set<std::string> shown;
    if (options.format == OutputFormat::Text)
      for (const ProcessReport& r : analyzed.reports) shown.insert(printable(r.file));
    for (size_t i = 0; i < judged_warnings.size(); ++i) {
      if (i < groups[0].size() && shown.count(printable(groups[0][i].name))) continue;
      for (const std::string& warning : judged_warnings[i]) std::cerr << "gpumem-report: " << warning << "\n";
    }
    write_report(out, analyzed.reports, analyzed.groups, options, text, batch ? &*batch : nullptr);
    for (auto& list : judged_failures) failures.insert(failures.end(), list.begin(), list.end());
    for (auto& list : judged_incomplete) incomplete.insert(incomplete.end(), list.begin(), list.end());
  }
  // A report that cannot be written (disk full) is an error, not a silent success; standard output
  // whose reader went away is not (reader_gone), and the gates below still decide the exit status.
  errno = 0;
  out.flush();
  destination.flush();
  if (file.is_open()) file.close();
  const bool written = out && destination;  // for -o, `destination` is the file: close() failing sets its failbit
  if (!written && !(options.output.empty() && reader_gone(STDOUT_FILENO))) {
    const int error = errno;
    throw std::runtime_error((options.output.empty() ? std::string("standard output") : options.output) +
                             ": cannot write the report" + (error ? std::string(": ") + strerror(error) : ""));
  }
  for (const std::string& failure : failures) std::cerr << "gpumem-report: FAILED: " << failure << (failure.back() == '\n' ? "" : "\n");
  for (const std::string& cut : incomplete) std::cerr << "gpumem-report: INCOMPLETE: " << cut << "\n";
  return !failures.empty() ? kExitGate : !incomplete.empty() ? kExitIncomplete : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed standard output is an error to handle where it happens (run(): a reader that went away is
  // not one), never a silent death by SIGPIPE that would lose the gates' exit status.
  signal(SIGPIPE, SIG_IGN);
  // Everything said on stderr (warnings, FAILED and INCOMPLETE lines, errors quoting the trace) has
  // its control characters escaped; the original buffer is back before static destructors flush it.
  TerminalStreambuf escaped_stderr(std::cerr.rdbuf());
  struct Restore {
    std::streambuf* original;
    ~Restore() { std::cerr.rdbuf(original); }
  } restore{std::cerr.rdbuf(&escaped_stderr)};
  Options options;
  try {
    options = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& error) {
    std::cerr << "gpumem-report: " << error.what() << " (run with --help for more)\n";
    return kExitBadInput;
  }
  if (options.help) {
    std::cout << help_text();
    return 0;
  }
  if (options.version) {
    std::cout << "gpumem-report " << GPUMEMTRACE_VERSION << "\n";
    return 0;
  }
  try {
    return run(options);
  } catch (const std::exception& error) {  // TraceError (file:line: what), I/O, suppressions, -o among the inputs
    std::cerr << "gpumem-report: error: " << printable(error.what()) << "\n";
    return kExitBadInput;
  }
}
