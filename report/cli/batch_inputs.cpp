// report/cli/batch_inputs.cpp — see batch_inputs.h.
#include "report/cli/batch_inputs.h"

#include <sys/stat.h>

#include <atomic>
#include <exception>
#include <map>
#include <system_error>
#include <thread>

#include "report/cli/jobs.h"

namespace gpumemtrace::report {

BatchReport batch_what_if_of(const std::vector<TraceInput>& inputs, const Options& options) {
  // The runs are read at once, up to --jobs at a time; the first error in input order is the one said.
  std::vector<BatchRun> runs(inputs.size());
  std::vector<std::exception_ptr> errors(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < inputs.size(); i = next++) {
      try {
        runs[i] = read_batch_run(inputs[i].path, inputs[i].name);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers;
  const size_t threads = std::min(options.jobs ? options.jobs : default_jobs(), inputs.size());
  try {
    for (size_t t = 1; t < threads; ++t) workers.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: those started and this one share the work.
  }
  work();
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  std::map<std::string, uint64_t> given;
  for (const auto& [trace, batch] : options.batch_of) {
    struct stat named {};
    const bool exists = ::stat(trace.c_str(), &named) == 0;
    const TraceInput* found = nullptr;
    for (const TraceInput& input : inputs) {
      struct stat st {};
      if (input.name == trace || (exists && input.spooled.empty() && ::stat(input.path.c_str(), &st) == 0 &&
                                  st.st_dev == named.st_dev && st.st_ino == named.st_ino)) {
        found = &input;
      }
    }
    if (!found) throw BatchError("--batch-of " + trace + "=" + std::to_string(batch) + ": not one of the traces given");
    given[found->name] = batch;
  }
  assign_batches(runs, given);
  BatchQuestion question;
  question.at = options.at_batch;
  question.max = options.max_batch;
  question.margin = options.batch_margin;
  question.margin_share = options.batch_margin_share;
  question.settings = options.what_if;
  question.recorded = options.recorded_settings;
  return batch_what_if(runs, question);
}

}  // namespace gpumemtrace::report
