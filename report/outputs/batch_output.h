// report/outputs/batch_output.h — the batch what-if (report/analyses/batch_what_if.h) in the text report
// (a section before the runs' own reports) and the JSON document (its "batch" key; docs/report.md lists
// the keys). Formats only: every figure comes from the BatchReport.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "report/analyses/batch_what_if.h"
#include "report/outputs/text_output.h"

namespace gpumemtrace::report {

nlohmann::json batch_to_json(const BatchReport& batch);
void write_batch_text(std::ostream& out, const BatchReport& batch, const TextOptions& options);

}  // namespace gpumemtrace::report
