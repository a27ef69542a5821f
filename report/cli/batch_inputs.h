// report/cli/batch_inputs.h — the batch what-if (report/analyses/batch_what_if.h) of gpumem-report's
// traces: each TRACE one run, read again for its requests (up to --jobs at a time), its batch size from
// --batch-of (TRACE as given, or the same file), its marks or its file name.
#pragma once

#include <vector>

#include "report/analyses/batch_what_if.h"
#include "report/cli/inputs.h"
#include "report/cli/options.h"

namespace gpumemtrace::report {

// Throws TraceError for a trace that cannot be read (the first in input order), BatchError for
// runs that cannot answer (a batch size not known, --batch-of naming no trace given, ...).
BatchReport batch_what_if_of(const std::vector<TraceInput>& inputs, const Options& options);

}  // namespace gpumemtrace::report
