// report/outputs/top_sites_output.h — the top call sites (report/analyses/top_sites.h) as text
// (`--top-sites`) and as the JSON document's `top_sites` entries.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "report/analyses/report_model.h"
#include "report/outputs/text_output.h"

namespace gpumemtrace::report {

// One `top_sites` entry per device and level of the process; `who` holds its pid and file.
void append_top_sites_json(const ProcessReport& r, const nlohmann::json& who, nlohmann::json& out);

// The "top sites" section of the text report: per device and level, the first options.max_items
// sites of each ranking.
void write_top_sites(std::ostream& out, const ProcessReport& r, const TextOptions& options);

}  // namespace gpumemtrace::report
