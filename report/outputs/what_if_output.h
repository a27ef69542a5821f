// report/outputs/what_if_output.h — the what-if table (what_if.h) and the time to OOM (time_to_oom.h) in
// the text report and the JSON document ("what_if", "time_to_oom"; docs/what-if.md lists the keys).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "report/analyses/report_model.h"
#include "report/outputs/text_output.h"

namespace gpumemtrace::report {

// Appends this process's entries to the top-level arrays (each entry names its pid and file).
void append_what_if_json(const ProcessReport& r, nlohmann::json& what_if, nlohmann::json& time_to_oom);

void write_what_if_text(std::ostream& out, const ProcessReport& r, const TextOptions& options);
void write_time_to_oom_text(std::ostream& out, const ProcessReport& r, const TextOptions& options);

// A row's fragmentation at its peak, as the what-if table's JSON gives it (the batch rows' too).
nlohmann::json at_peak_json(const FragmentationPoint& p);

// "about 3 h 10 min", "about 2 min 5 s", "about 40 s", "under a second".
std::string format_duration(double seconds);

}  // namespace gpumemtrace::report
