// report/analyses/batch_fit.cpp — see batch_fit.h.
#include "report/analyses/batch_fit.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

namespace gpumemtrace::report {

namespace {

// The least-squares parabola through (x, y) (three distinct x or more: a residual needs them), by
// the normal equations, solved by Cramer's rule.
void parabola_through(const std::vector<std::pair<double, double>>& points, RequestFit& fit) {
  long double s[5] = {}, t[3] = {};  // s[k] = sum x^k, t[k] = sum y x^k
  for (const auto& [x, y] : points) {
    long double p = 1;
    for (int k = 0; k < 5; ++k, p *= x) {
      s[k] += p;
      if (k < 3) t[k] += y * p;
    }
  }
  auto det = [](long double a, long double b, long double c, long double d, long double e, long double f, long double g,
                long double h, long double i) { return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g); };
  const long double d = det(s[0], s[1], s[2], s[1], s[2], s[3], s[2], s[3], s[4]);
  if (d == 0) return;
  fit.q0 = static_cast<double>(det(t[0], s[1], s[2], t[1], s[2], s[3], t[2], s[3], s[4]) / d);
  fit.q1 = static_cast<double>(det(s[0], t[0], s[2], s[1], t[1], s[3], s[2], t[2], s[4]) / d);
  fit.q2 = static_cast<double>(det(s[0], s[1], t[0], s[1], s[2], t[1], s[2], s[3], t[2]) / d);
}

// The least-squares line through (x, y); at least two distinct x.
RequestFit line_through(const std::vector<std::pair<double, double>>& points) {
  long double mx = 0, my = 0;
  for (const auto& [x, y] : points) {
    mx += x;
    my += y;
  }
  mx /= points.size();
  my /= points.size();
  long double sxy = 0, sxx = 0;
  for (const auto& [x, y] : points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) * (x - mx);
  }
  RequestFit fit;
  fit.b = static_cast<double>(sxy / sxx);
  fit.a = static_cast<double>(my - sxy / sxx * mx);
  for (const auto& [x, y] : points) fit.residual = std::max(fit.residual, std::fabs(y - (fit.a + fit.b * x)));
  if (fit.residual <= kLinearTolerance) fit.residual = 0;  // whole bytes: a rounding, not a curve
  fit.kind = fit.b != 0 ? RequestFit::Scales : RequestFit::Constant;
  if (fit.residual > 0) parabola_through(points, fit);
  return fit;
}

void summarize(const BatchRun& run, SizeFits& out) {
  std::unordered_map<uint32_t, size_t> index;  // template site -> out.sites
  for (size_t i = 0; i < out.requests.size(); ++i) {
    const RequestFit& fit = out.requests[i];
    switch (fit.kind) {
      case RequestFit::Scales: ++out.scales; break;
      case RequestFit::Constant: ++out.constant; break;
      case RequestFit::BySite: ++out.by_site; break;
      case RequestFit::Unmatched: ++out.unmatched; break;
    }
    if (fit.residual > 0) ++out.not_linear;
    out.max_residual = std::max(out.max_residual, fit.residual);
    const BatchRequest& request = run.requests[i];
    auto [it, inserted] = index.emplace(request.site, out.sites.size());
    if (inserted) {
      SiteFit site;
      site.site = request.site;
      site.device = run.records[request.record].device;
      site.a = fit.a;
      site.b = fit.b;
      site.kind = fit.kind;
      site.role = request.role;
      out.sites.push_back(site);
    }
    SiteFit& site = out.sites[it->second];
    ++site.requests;
    site.same_line = site.same_line && fit.a == site.a && fit.b == site.b;
    site.residual = std::max(site.residual, fit.residual);
  }
  std::stable_sort(out.sites.begin(), out.sites.end(), [](const SiteFit& x, const SiteFit& y) {
    return std::fabs(x.b) != std::fabs(y.b) ? std::fabs(x.b) > std::fabs(y.b) : x.a * x.requests > y.a * y.requests;
  });
}

}  // namespace

SizeFits fit_sizes(const std::vector<const BatchRun*>& runs, size_t tmpl) {
  const BatchRun& t = *runs[tmpl];
  SizeFits out;
  std::set<uint64_t> batches;
  for (const BatchRun* run : runs) batches.insert(run->batch);
  out.batches = batches.size();
  out.linearity_checked = out.batches >= 3;
  // Each other run's sizes per site, in order.
  std::vector<std::unordered_map<uint64_t, std::vector<uint64_t>>> sizes(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    if (r == tmpl) continue;
    for (const BatchRequest& request : runs[r]->requests) sizes[r][request.key].push_back(request.size);
  }
  out.requests.resize(t.requests.size());
  std::unordered_map<uint64_t, uint32_t> seen;  // site -> requests of the template met so far
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < t.requests.size(); ++i) {
    const BatchRequest& request = t.requests[i];
    const uint32_t k = seen[request.key]++;
    points.assign(1, {static_cast<double>(t.batch), static_cast<double>(request.size)});
    bool two_batches = false;
    for (size_t r = 0; r < runs.size(); ++r) {
      if (r == tmpl) continue;
      auto found = sizes[r].find(request.key);
      if (found == sizes[r].end() || k >= found->second.size()) continue;
      points.emplace_back(static_cast<double>(runs[r]->batch), static_cast<double>(found->second[k]));
      two_batches = two_batches || runs[r]->batch != t.batch;
    }
    if (two_batches) out.requests[i] = line_through(points);
  }
  // The unmatched take their site's line, when the site has one.
  struct Line {
    double a = 0, b = 0;
    bool any = false, same = true;
  };
  std::unordered_map<uint64_t, Line> lines;
  for (size_t i = 0; i < t.requests.size(); ++i) {
    const RequestFit& fit = out.requests[i];
    if (fit.kind == RequestFit::Unmatched) continue;
    Line& line = lines[t.requests[i].key];
    if (line.any) line.same = line.same && line.a == fit.a && line.b == fit.b;
    line.a = line.any ? line.a : fit.a;
    line.b = line.any ? line.b : fit.b;
    line.any = true;
  }
  for (size_t i = 0; i < t.requests.size(); ++i) {
    RequestFit& fit = out.requests[i];
    if (fit.kind != RequestFit::Unmatched) continue;
    auto found = lines.find(t.requests[i].key);
    if (found != lines.end() && found->second.same) {
      fit.a = found->second.a;
      fit.b = found->second.b;
      fit.kind = RequestFit::BySite;
    } else {
      fit.a = static_cast<double>(t.requests[i].size);
    }
  }
  summarize(t, out);
  return out;
}

SizeFits fit_by_roles(const BatchRun& run) {
  SizeFits out;
  out.by_roles = true;
  out.batches = 1;
  out.requests.resize(run.requests.size());
  for (size_t i = 0; i < run.requests.size(); ++i) {
    const BatchRequest& request = run.requests[i];
    RequestFit& fit = out.requests[i];
    if (request.role == Role::Activations || request.role == Role::BackwardTemporaries) {
      fit.b = static_cast<double>(request.size) / static_cast<double>(run.batch);
      fit.kind = RequestFit::Scales;
    } else {
      fit.a = static_cast<double>(request.size);
      fit.kind = RequestFit::Constant;
    }
  }
  summarize(run, out);
  return out;
}

uint64_t size_at(const RequestFit& fit, double batch, int spread, double lo, double hi) {
  double size = fit.a + fit.b * batch;
  if (spread && fit.residual > 0) {
    double widen = 1;
    if (hi > lo) {
      const double distance = batch < lo ? lo - batch : batch > hi ? batch - hi : 0;
      widen += distance / (hi - lo);
    }
    const double curve = fit.q0 + fit.q1 * batch + fit.q2 * batch * batch;
    size = spread < 0 ? std::min(size - fit.residual * widen, curve) : std::max(size + fit.residual * widen, curve);
  }
  if (!(size > 0)) return 0;
  constexpr uint64_t kLargest = uint64_t{1} << 62;  // far past any device: the replay refuses it
  if (size >= static_cast<double>(kLargest)) return kLargest;
  return static_cast<uint64_t>(std::llround(size));
}

}  // namespace gpumemtrace::report
