// report/cli/jobs.cpp — several traces analysed at once (jobs.h).
#include "report/cli/jobs.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <tuple>

#include "report/reader/line_reader.h"

namespace gpumemtrace::report {

size_t default_jobs() { return usable_cpus(); }

void for_each_on_threads(size_t count, size_t threads, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) job(i);
  };
  std::vector<std::thread> workers;
  try {
    for (size_t t = 1; t < std::min(threads, count); ++t) workers.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: those started and this one share the work.
  }
  work();
  for (std::thread& worker : workers) worker.join();
}

namespace {

// What became of one input: a report, a skip warning, or an error.
struct Outcome {
  std::optional<ProcessReport> report;
  std::vector<std::string> skipped;
  std::exception_ptr error;
};

void analyze_one(const TraceInput& input, bool alone, const Suppressions& suppressions, ReadObserver* observer,
                 const AnalysisRequest& what_if, Outcome& out) {
  try {
    if (alone || !input.spooled.empty()) {
      out.report = analyze_input(input, suppressions, observer, what_if);
    } else {
      out.report = analyze_one_of_many(input.path, suppressions, observer, &out.skipped, what_if);
    }
  } catch (...) {
    out.error = std::current_exception();
  }
}

}  // namespace

AnalyzedInputs analyze_inputs(const std::vector<TraceInput>& inputs, const Suppressions& suppressions,
                              ProgressLine* progress, size_t jobs, const AnalysisRequest& what_if,
                              const Folding* folding) {
  const bool alone = inputs.size() == 1;
  ReadObserver* observer = progress && progress->enabled() ? progress : nullptr;
  std::vector<Outcome> outcomes(inputs.size());
  // Many processes: each report goes to `folder` as it is made (a bounded set kept in full, the rest
  // summed), instead of waiting in `outcomes` for the end.
  const bool folds = folding && inputs.size() > folding->max_full;
  ProcessFolder folder(folding ? folding->max_full : 0);
  std::mutex folder_mutex;
  auto settle = [&](size_t i) {
    Outcome& outcome = outcomes[i];
    if (!folding || outcome.error || !outcome.report) return;
    std::lock_guard<std::mutex> lock(folder_mutex);
    if (folding->inspect) folding->inspect(i, *outcome.report);
    if (!folds) return;
    folder.add(i, std::move(*outcome.report));
    outcome.report.reset();
  };
  const size_t threads = std::max<size_t>(1, std::min(jobs, inputs.size()));
  if (threads == 1) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (progress) progress->start_file(inputs[i].name, regular_file_size(inputs[i].path));
      analyze_one(inputs[i], alone, suppressions, observer, what_if, outcomes[i]);
      if (outcomes[i].error) break;  // one after another: nothing after the first error is read
      settle(i);
    }
  } else {
    uint64_t total = 0;
    for (const TraceInput& input : inputs) total += regular_file_size(input.path);
    if (progress) progress->start_file(std::to_string(inputs.size()) + " traces", total);
    // The first input (in input order) that failed: inputs after it need not be analysed.
    std::atomic<size_t> first_error{inputs.size()};
    for_each_on_threads(inputs.size(), threads, [&](size_t i) {
      if (i > first_error.load()) return;
      analyze_one(inputs[i], alone, suppressions, observer, what_if, outcomes[i]);
      settle(i);
      if (!outcomes[i].error) return;
      size_t seen = first_error.load();
      while (i < seen && !first_error.compare_exchange_weak(seen, i)) {
      }
    });
  }
  AnalyzedInputs out;
  for (Outcome& outcome : outcomes) {
    if (outcome.error) std::rethrow_exception(outcome.error);
    for (std::string& warning : outcome.skipped) out.skipped.push_back(std::move(warning));
    if (outcome.report) out.reports.push_back(std::move(*outcome.report));
  }
  if (folds) std::tie(out.reports, out.groups) = folder.finish();
  return out;
}

}  // namespace gpumemtrace::report
