// report/outputs/merge_output.h — `gpumem-report merge`'s view (rank_merge.h) as text and as JSON.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/analyses/rank_merge.h"
#include "report/outputs/stack_view.h"

namespace gpumemtrace::report {

// `top`: entries per list (highest peaks, OOMs, leak sites); the figures above each list count all.
// Stacks are shown as the text report shows them (`stacks`: --frames, --user-code, ...).
void write_merge_text(std::ostream& out, const MergedRanks& merged, const std::vector<RankSummary>& summaries,
                      const std::vector<std::string>& warnings, size_t top, const StackViewOptions& stacks);
// Every entry of every list (a program reading it wants them all).
nlohmann::json merge_to_json(const MergedRanks& merged, const std::vector<RankSummary>& summaries,
                             const std::vector<std::string>& warnings);

}  // namespace gpumemtrace::report
