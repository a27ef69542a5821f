// report/outputs/html_assets.h — the HTML report's inlined scripts and styles: the chart libraries
// from vendor/ (pinned by vendor/package-lock.json) and report/outputs/html/app.{js,css}.
// Defined in a source generated at build time by report/outputs/html/embed_assets.py, which refuses
// any text that could close the element it is inlined into.
#pragma once

#include <string_view>

namespace gpumemtrace::report {

extern const std::string_view kHtmlScript;  // every script, in load order
extern const std::string_view kHtmlStyle;   // every style sheet

}  // namespace gpumemtrace::report
