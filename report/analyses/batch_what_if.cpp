// report/analyses/batch_what_if.cpp — see batch_what_if.h.
#include "report/analyses/batch_what_if.h"

#include <algorithm>
#include <set>

#include "report/analyses/batch_replay.h"
#include "report/analyses/what_if.h"

namespace gpumemtrace::report {

namespace {

using allocator_model::DeviceReplay;

// The template among `runs`: the largest batch the allocator never refused, else the largest.
size_t choose_template(const std::vector<const BatchRun*>& runs) {
  size_t best = 0;
  auto better = [](const BatchRun& x, const BatchRun& y) {  // x is a better template than y
    const bool x_clean = !x.recorded_ooms && x.complete, y_clean = !y.recorded_ooms && y.complete;
    return x_clean != y_clean ? x_clean : x.batch > y.batch;
  };
  for (size_t i = 1; i < runs.size(); ++i) {
    if (better(*runs[i], *runs[best])) best = i;
  }
  return best;
}

// The request a replay's seq (a record index) names.
uint64_t request_at(const BatchRun& run, uint64_t record) {
  auto it = std::lower_bound(run.requests.begin(), run.requests.end(), record,
                             [](const BatchRequest& r, uint64_t at) { return r.record < at; });
  return static_cast<uint64_t>(it - run.requests.begin());
}

BatchRefusal refusal_of(const BatchRun& run, const FirstRefusal& first, const BatchSizes& sizes) {
  BatchRefusal out;
  out.device = first.device;
  out.recorded = first.recorded;
  out.reserved = first.reserved;
  out.capacity = first.capacity;
  const BatchRecord& record = run.records[first.record];
  out.seq = record.seq;
  out.time_ns = record.t;
  out.request = request_at(run, first.record);
  if (out.request < run.requests.size()) {
    const BatchRequest& request = run.requests[out.request];
    out.requested = sizes.fits ? size_at(sizes.fits->requests[out.request], sizes.batch, sizes.spread, sizes.lo, sizes.hi)
                               : request.size;
    out.stack = run.sites[request.site];
  }
  return out;
}

// The margin on each device of the run: bytes, or a share of what the process may hold there (the
// replay works it out: a memory fraction's cap is known only as the run's settings are replayed).
std::map<int32_t, BatchReplayOptions::Margin> margins(const BatchRun& run, const BatchQuestion& question) {
  std::map<int32_t, BatchReplayOptions::Margin> out;
  for (const DeviceInfo& info : run.devices) {
    if (info.device >= 0) out[info.device] = {question.margin, question.margin_share};
  }
  for (const BatchRecord& r : run.records) {
    if (r.device >= 0 && !out.count(r.device)) out[r.device] = {question.margin, question.margin_share};
  }
  return out;
}

BatchRow make_row(const DeviceReplay& d, const std::string& settings, uint64_t batch, bool recorded_sizes) {
  BatchRow row;
  row.settings = settings;
  row.batch = batch;
  row.recorded_sizes = recorded_sizes;
  row.reserved_peak = d.stats.peak_reserved;
  row.allocated_peak = d.stats.peak_allocated;
  row.at_peak = at_peak_of(d.stats);
  row.cache_flushes = d.stats.cache_flushes;
  row.retries = d.stats.retries;
  row.capacity = d.capacity;
  row.timeline = timeline_of(d.timeline);
  return row;
}

const DeviceReplay* on_device(const std::vector<DeviceReplay>& replays, int32_t device) {
  for (const DeviceReplay& d : replays) {
    if (d.device == device) return &d;
  }
  return nullptr;
}

// The rows of one replay (one per device), with the first refusal on each device.
void add_rows(const BatchRun& run, const std::vector<DeviceReplay>& replays, const BatchSizes& sizes,
              const std::string& settings, uint64_t batch, bool recorded_sizes, BatchReport& report) {
  for (BatchDevice& device : report.devices) {
    const DeviceReplay* d = on_device(replays, device.device);
    if (!d) continue;
    BatchRow row = make_row(*d, settings, batch, recorded_sizes);
    const FirstRefusal first = first_refusal({*d});
    if (first.any) {
      row.refused = true;
      row.refusal = refusal_of(run, first, sizes);
    }
    device.rows.push_back(std::move(row));
  }
}

// The reserved peak at the two ends of each request's range, on each device: min and max of the
// three replays (the allocator's placement need not follow the sizes' order).
void add_ranges(const BatchRun& run, BatchSizes sizes, const BatchReplayOptions& options, BatchReport& report) {
  for (int spread : {-1, 1}) {
    sizes.spread = spread;
    const std::vector<DeviceReplay> replays = replay_at(run, sizes, options);
    for (BatchDevice& device : report.devices) {
      const DeviceReplay* d = on_device(replays, device.device);
      if (!d) continue;
      BatchRow& row = device.rows.back();
      if (!row.has_range) row.reserved_low = row.reserved_high = row.reserved_peak;
      row.has_range = true;
      row.reserved_low = std::min(row.reserved_low, d->stats.peak_reserved);
      row.reserved_high = std::max(row.reserved_high, d->stats.peak_reserved);
    }
  }
}

BatchMax search(const BatchRun& run, const BatchSizes& sizes, const BatchReplayOptions& options,
                const std::string& settings, const BatchQuestion& question, bool ranged,
                const std::vector<BatchDevice>& report_devices) {
  BatchMax out;
  out.settings = settings;
  for (const BatchDevice& device : report_devices) {
    if (!device.capacity) out.capacity_unknown = true;
  }
  if (out.capacity_unknown) return out;
  MaxBatchSearch found = find_max_batch(run, sizes, options, run.batch);
  out.largest = found.largest;
  out.unbounded = found.unbounded;
  out.failing = found.failing;
  out.replays = found.replays;
  if (!found.unbounded) {
    BatchSizes at = sizes;
    at.batch = static_cast<double>(found.failing);
    const FirstRefusal first = first_refusal(found.at_failing);
    if (first.any) out.refusal = refusal_of(run, first, at);
    out.margin = question.margin;  // the bytes the replay kept on the device that refused
    for (const allocator_model::DeviceReplay& d : found.at_failing) {
      if (d.device == out.refusal.device) out.margin = d.kept_free;
    }
  }
  if (ranged && !found.unbounded) {
    // A request at the high end of its range runs out sooner: the low end of the largest batch.
    BatchSizes high = sizes, low = sizes;
    high.spread = 1;
    low.spread = -1;
    const MaxBatchSearch small = find_max_batch(run, high, options, std::max<uint64_t>(1, found.largest));
    const MaxBatchSearch large = find_max_batch(run, low, options, std::max<uint64_t>(1, found.largest));
    out.has_range = true;
    out.largest_low = std::min(small.largest, found.largest);
    out.largest_high = large.unbounded ? kMaxSearchedBatch : std::max(large.largest, found.largest);
    out.replays += small.replays + large.replays;
  }
  return out;
}

void add_leave_one_out(const std::vector<BatchRun>& runs, const std::vector<std::vector<DeviceReplay>>& own,
                       const BatchQuestion& question, BatchReport& report) {
  for (size_t k = 0; k < runs.size(); ++k) {
    std::vector<const BatchRun*> others;
    for (size_t r = 0; r < runs.size(); ++r) {
      if (r != k) others.push_back(&runs[r]);
    }
    const size_t tmpl = choose_template(others);
    const SizeFits fits = fit_sizes(others, tmpl);
    BatchReplayOptions options;
    options.recorded = question.recorded;
    BatchSizes sizes;
    sizes.fits = &fits;
    sizes.batch = static_cast<double>(runs[k].batch);
    const std::vector<DeviceReplay> predicted = replay_at(*others[tmpl], sizes, options);
    for (const DeviceReplay& p : predicted) {
      const DeviceReplay* replayed = on_device(own[k], p.device);
      if (!replayed) continue;
      BatchCheck check;
      check.file = runs[k].file;
      check.batch = runs[k].batch;
      check.template_file = others[tmpl]->file;
      check.device = p.device;
      check.predicted = p.stats.peak_reserved;
      check.replayed = replayed->stats.peak_reserved;
      check.recorded = replayed->recorded_reserved_peak;
      check.refused_predicted = first_refusal({p}).any;
      check.refused_replayed = first_refusal({*replayed}).any;
      report.leave_one_out.push_back(check);
    }
  }
}

}  // namespace

void assign_batches(std::vector<BatchRun>& runs, const std::map<std::string, uint64_t>& given) {
  for (BatchRun& run : runs) {
    auto it = given.find(run.file);
    if (it != given.end()) {
      run.batch = it->second;
      run.batch_from = "--batch-of";
      continue;
    }
    if (!run.mark_conflict.empty()) {
      throw BatchError(run.file + ": " + run.mark_conflict + ": give its batch size with --batch-of " + run.file + "=N");
    }
    if (run.marked_batch) {
      run.batch = *run.marked_batch;
      run.batch_from = "a mark";
    } else if (std::optional<uint64_t> named = batch_in_name(run.file)) {
      run.batch = *named;
      run.batch_from = "the file name";
    } else {
      throw BatchError(run.file + ": its batch size is not known: name it in the file name (run_b16.jsonl.zst), "
                       "mark it in the run (gpumemtrace_mark(\"batch=16\")), or give --batch-of " + run.file + "=16");
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (runs[i].batch == runs[j].batch) {
        throw BatchError(runs[j].file + " and " + runs[i].file + " are both batch " + std::to_string(runs[i].batch) +
                         " (" + runs[i].batch_from + "): give runs of different batch sizes");
      }
    }
  }
}

BatchReport batch_what_if(const std::vector<BatchRun>& runs, const BatchQuestion& question) {
  BatchReport report;
  std::vector<const BatchRun*> all;
  for (const BatchRun& run : runs) all.push_back(&run);
  const size_t tmpl = choose_template(all);
  const BatchRun& t = runs[tmpl];
  if (t.requests.empty()) {
    throw BatchError(t.file + ": no PyTorch tensor request (torch.alloc) to replay: the batch what-if needs a run "
                     "recorded with the PyTorch hook (docs/pytorch.md)");
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const BatchRun& run = runs[i];
    report.runs.push_back(BatchRunInfo{run.file, run.batch, run.batch_from, run.requests.size(), run.recorded_ooms,
                                       run.complete, i == tmpl});
  }
  report.template_file = t.file;
  report.template_batch = t.batch;
  report.estimate = runs.size() == 1;
  const SizeFits fits = report.estimate ? fit_by_roles(t) : fit_sizes(all, tmpl);
  report.requests = t.requests.size();
  report.scales = fits.scales;
  report.constant = fits.constant;
  report.by_site = fits.by_site;
  report.unmatched = fits.unmatched;
  report.not_linear = fits.not_linear;
  report.max_residual = fits.max_residual;
  report.batches = fits.batches;
  report.linearity_checked = fits.linearity_checked;
  for (const SiteFit& s : fits.sites) {
    report.sites.push_back(BatchSite{t.sites[s.site], s.device, s.requests, s.same_line, s.a, s.b, s.residual, s.kind, s.role});
  }
  double lo = 0, hi = 0;
  for (const BatchRun& run : runs) {
    lo = lo == 0 ? static_cast<double>(run.batch) : std::min(lo, static_cast<double>(run.batch));
    hi = std::max(hi, static_cast<double>(run.batch));
  }

  // Each run at its own sizes, checked against its recording: the template's says whether the model
  // reproduces this allocator; the others are leave-one-out's reference.
  std::vector<std::vector<DeviceReplay>> own(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i != tmpl && runs.size() < 3) continue;
    BatchReplayOptions options;
    options.recorded = question.recorded;
    options.check = true;
    options.stop_at_refusal = false;  // the whole run, to compare with its recording
    own[i] = replay_at(runs[i], BatchSizes{}, options);
  }
  for (const DeviceReplay& d : own[tmpl]) {
    BatchDevice device;
    device.device = d.device;
    for (const DeviceInfo& info : t.devices) device.total = info.device == d.device ? info.total : device.total;
    device.capacity = d.capacity;
    device.faithful = !d.divergence;
    if (d.divergence) {
      const uint64_t at = d.divergence->seq;  // a record index + 1; 0: at the end
      device.divergence_seq = at && at <= t.records.size() ? t.records[at - 1].seq : 0;
      device.divergence = d.divergence->what;
    }
    device.recorded_reserved_peak = d.recorded_reserved_peak;
    report.devices.push_back(std::move(device));
  }

  std::vector<std::string> settings{""};
  settings.insert(settings.end(), question.settings.begin(), question.settings.end());
  const bool ranged = fits.not_linear > 0;
  // The same for every setting: the template's devices (a scan of its records).
  const std::map<int32_t, BatchReplayOptions::Margin> kept = question.max ? margins(t, question)
                                                                          : std::map<int32_t, BatchReplayOptions::Margin>{};
  for (const std::string& setting : settings) {
    BatchReplayOptions options;
    options.overlay = setting;
    options.recorded = question.recorded;
    // The template's own batch, at its recorded sizes.
    add_rows(t, setting.empty() ? own[tmpl] : replay_at(t, BatchSizes{}, options), BatchSizes{}, setting, t.batch, true,
             report);
    for (uint64_t batch : question.at) {
      const BatchSizes sizes{&fits, static_cast<double>(batch), 0, lo, hi};
      add_rows(t, replay_at(t, sizes, options), sizes, setting, batch, false, report);
      if (ranged) add_ranges(t, sizes, options, report);
    }
    if (question.max) {
      options.keep_free = kept;
      report.max.push_back(search(t, BatchSizes{&fits, 0, 0, lo, hi}, options, setting, question, ranged, report.devices));
    }
  }
  if (runs.size() >= 3) add_leave_one_out(runs, own, question, report);
  return report;
}

void add_batch_rows(const BatchReport& batch, std::vector<ProcessReport>& reports) {
  for (ProcessReport& report : reports) {
    if (report.file != batch.template_file) continue;
    for (WhatIfReport& w : report.what_if) {
      if (!w.faithful || w.rows.empty()) continue;
      for (const BatchDevice& d : batch.devices) {
        if (d.device != w.device) continue;
        for (const BatchRow& row : d.rows) {
          // At the run's own sizes, a row is the table's own (the recorded run, or the what-if replay of
          // that setting): only the predicted batches join it.
          if (row.recorded_sizes) continue;
          WhatIfRow out;
          out.settings = row.settings;
          out.reserved_peak = row.reserved_peak;
          out.allocated_peak = row.allocated_peak;
          out.at_peak = row.at_peak;
          out.cache_flushes = row.cache_flushes;
          out.retries = row.retries;
          out.new_ooms = row.refused ? 1 : 0;
          out.timeline = row.timeline;
          out.batch = row.batch;
          out.estimate = batch.estimate;
          out.has_range = row.has_range;
          out.reserved_low = row.reserved_low;
          out.reserved_high = row.reserved_high;
          w.rows.push_back(std::move(out));
        }
      }
    }
  }
}

}  // namespace gpumemtrace::report
