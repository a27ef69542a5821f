// report/outputs/html_output.cpp — the HTML report: a page skeleton, the inlined scripts and
// styles (html_assets.h) and the report's JSON document; report/outputs/html/app.js draws the rest.
#include "report/outputs/html_output.h"

#include "report/outputs/html_assets.h"
#include "report/outputs/html_data.h"
#include "report/outputs/json_output.h"

namespace gpumemtrace::report {

std::string script_safe_json(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size() + json_text.size() / 16);
  for (size_t i = 0; i < json_text.size(); ++i) {
    const char c = json_text[i];
    // `<` only occurs inside JSON strings, where \u003c means the same character.
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '\xE2' && i + 2 < json_text.size() && json_text[i + 1] == '\x80' &&
               (json_text[i + 2] == '\xA8' || json_text[i + 2] == '\xA9')) {
      out += json_text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";  // line terminators in old JS
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

void write_html(std::ostream& out, const std::vector<ProcessReport>& reports, const ProcessGroups* groups) {
  // The JSON report, each stack with its view, and the allocation timelines (html_data.h).
  nlohmann::json data = reports_to_json(reports, groups);
  compact_for_page(data, StackViewOptions{});
  nlohmann::json timelines = nlohmann::json::array();
  for (const ProcessReport& r : reports) timelines.push_back(allocation_timeline_json(r));
  data["allocation_timelines"] = std::move(timelines);
  // Trace text need not be UTF-8: invalid bytes become U+FFFD, as in --format json.
  const std::string document = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         // Nothing may leave the page: the report is opened offline and attached to CI runs.
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
         "<title>gpumemtrace report</title>\n<style>\n"
      << kHtmlStyle << "</style>\n</head>\n<body>\n"
      << "<noscript>This report draws itself with JavaScript; the same data is in "
         "<code>gpumem-report --format json</code>.</noscript>\n"
      << "<main id=\"report\"></main>\n"
      << "<script type=\"application/json\" id=\"gpumem-data\">" << script_safe_json(document) << "</script>\n"
      << "<script>\n" << kHtmlScript << "</script>\n</body>\n</html>\n";
}

}  // namespace gpumemtrace::report
