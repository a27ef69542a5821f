// report/analyses/batch_fit.h — which requests scale with the batch, and how: each request of one run
// (the template) matched with the same request of the other runs, and its size fitted as a + b * batch.
//
// Matching: by site and order. The k-th request from a site (batch_runs.h: its stack on its device) in
// the template is the k-th request from that site in each other run; one with no k-th partner in
// another run is matched in the runs that have one. A request matched in runs of at least two batch
// sizes (the template's counted) gets the least-squares line through its sizes: exact through two
// points, and through more its residual is the largest distance of a size from the line. A request
// matched in fewer takes the line of its site when every matched request of that site has the same
// one (a loop with more iterations in one run), else it keeps its recorded size and is counted
// unmatched.
//
// One run alone (fit_by_roles): activations and backward temporaries (roles.h) scale in proportion to
// the batch (a = 0, b = size / batch), the rest stays: an estimate, and the report says so.
//
// Pure: runs in, fits out. Memory: per request of the template, one RequestFit; per site of the other
// runs, their sizes in order (while fitting).
#pragma once

#include <cstdint>
#include <vector>

#include "report/analyses/batch_runs.h"

namespace gpumemtrace::report {

// A size off its line by more than this is not linear (sizes are whole bytes: a line through
// integer sizes at integer batches may miss by rounding, never by a byte).
inline constexpr double kLinearTolerance = 0.5;

struct RequestFit {
  enum Kind : uint8_t {
    Scales,     // b != 0
    Constant,   // matched, b == 0: parameters, optimizer state, workspaces of a fixed size
    BySite,     // not matched in two batch sizes: its site's line
    Unmatched,  // kept as recorded
  };
  double a = 0;         // bytes at batch 0
  double b = 0;         // bytes per unit of batch
  double residual = 0;  // the largest distance of a matched size from the line (0 through two points)
  // When residual > 0 (three batch sizes or more): the least-squares parabola q0 + q1 x + q2 x^2
  // through the sizes, the simplest curve they follow; the range of the size spans it.
  double q0 = 0, q1 = 0, q2 = 0;
  Kind kind = Unmatched;
};

// What a site's requests do, for the report (the template's sites, largest slope first).
struct SiteFit {
  uint32_t site = 0;          // index into the template's BatchRun::sites
  int32_t device = -1;
  uint64_t requests = 0;
  bool same_line = true;      // every request of the site has the same a and b
  double a = 0, b = 0;        // the first request's line
  double residual = 0;        // the largest of its requests'
  RequestFit::Kind kind = RequestFit::Unmatched;  // the first request's
  Role role = Role::Other;    // the first request's
};

struct SizeFits {
  std::vector<RequestFit> requests;  // one per template request
  bool by_roles = false;             // one run: an estimate from the roles
  size_t batches = 0;                // distinct batch sizes the fit saw
  bool linearity_checked = false;    // three or more: a residual means something
  uint64_t scales = 0, constant = 0, by_site = 0, unmatched = 0;
  uint64_t not_linear = 0;           // requests with residual > kLinearTolerance
  double max_residual = 0;
  std::vector<SiteFit> sites;        // every template site, by slope (largest first)
};

// `runs[tmpl]` is the template. Every run's batch is known; at least two distinct batch sizes.
SizeFits fit_sizes(const std::vector<const BatchRun*>& runs, size_t tmpl);
SizeFits fit_by_roles(const BatchRun& run);

// The request's size at `batch`, in whole bytes, never negative. `spread`: 0 the line; -1 the low end
// of its range, +1 the high end. The range of a size that is not a straight line spans the line
// widened by its residual (more beyond the batch sizes fitted, lo..hi: residual * (1 + distance /
// (hi - lo))) and the parabola through its sizes; a straight line has none.
uint64_t size_at(const RequestFit& fit, double batch, int spread = 0, double lo = 0, double hi = 0);

}  // namespace gpumemtrace::report
