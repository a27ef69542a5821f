// report/outputs/html/sections.js — the report's findings as a person reads them: each
// out-of-memory incident as a card (the verdict and the request, why, what filled the device, the
// advice, the figures, then the stack beside the top holders), and a table for each other list of
// the JSON report (leaks, memory held at exit, growth, fragmentation, what-if, time to OOM, failed
// calls, pinned host memory). Every key of those lists has a place here (docs/report.md, "JSON
// output"); rows that show stacks are named by the line that tells them apart (stacks.js).
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  const known = (v) => v !== null && v !== undefined;
  const pct = (ratio) => `${(100 * ratio).toFixed(0)}%`;

  // Bytes by role, largest first, as "activations 1.2 GiB · parameters 300 MiB" (zero roles left out).
  function rolesLine(bytes, roles) {
    return Object.entries(roles || {}).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1])
      .map(([name, v]) => `${name} ${bytes(v)}`).join(" · ");
  }

  // What filled the device (ooms[].cause, when the report gives one): the growing site, how much it
  // grew, over how many steps, and its share at the crash.
  function causeLine(ui, cause, growth) {
    const { h, bytes } = ui;
    const site = known(cause.growth) && growth[cause.growth] ? growth[cause.growth] : null;
    const stack = cause.stack || (site && site.stack);
    const parts = [];
    if (known(cause.grew_bytes)) parts.push(`grew by ${bytes(cause.grew_bytes)}${known(cause.steps) ? ` over ${cause.steps} steps` : ""}`);
    if (known(cause.held_bytes)) {
      const share = known(cause.share) ? ` (${pct(cause.share)} of ${cause.share_of === "device" ? "the device" : "what was live"})` : "";
      parts.push(`held ${bytes(cause.held_bytes)}${share} at the crash`);
    }
    return h("div", { class: "cause" }, h("span", { class: "label" }, "What filled it: "),
      stack ? GM.stackCell(h, stack) : null, parts.length ? h("span", {}, ` this site ${parts.join(" and ")}.`) : null);
  }

  // One card per incident; `crash` is the incident the run died of (shown first, said so).
  GM.oomIncidents = function (ui, ooms, t0, opts) {
    const { h, bytes, seconds } = ui;
    const order = opts.crash ? [opts.crash, ...ooms.filter((o) => o !== opts.crash)] : ooms;
    return h("div", { class: "incidents" }, order.map((o) => {
      const n = ooms.indexOf(o) + 1;
      const facts = [
        `live ${bytes(o.live_bytes)}` + (o.allocated_bytes ? ` (${bytes(o.allocated_bytes)} in blocks)` : ""),
        known(o.device_free) ? `device free ${o.stale_reading ? "about " : ""}${bytes(o.device_free)}${o.device_total ? ` of ${bytes(o.device_total)}` : ""}` +
          (o.stale_reading ? ` (its last reading, ${bytes(o.stale_reading.free)} free with ${bytes(o.stale_reading.reserved)} held, is stale)` : "")
          : "device free: unknown",
        o.address_gaps && o.address_gaps.inside ? `holes between the live allocations: ${bytes(o.address_gaps.inside)}, the largest ${bytes(o.address_gaps.largest)}, over ${bytes(o.address_gaps.span)}` : null,
        o.fragmentation ? `largest free block ${bytes(o.fragmentation.largest_free_block)} of ${bytes(o.fragmentation.free_in_reserved)} free in reserved` : null,
        o.cap ? `cap: ${pct(o.cap.fraction)} of the device${known(o.cap.bytes) ? ` (${bytes(o.cap.bytes)})` : ""}, by ${o.cap.source}` : null,
        o.phase ? `phase “${o.phase}”` : null,
        o.attempts_total > 1 ? `${o.attempts_total} attempts: ${(o.attempts || []).map((a) => `${a.api || a.op} ${bytes(a.size)}${a.result ? ` → error ${a.result}` : ""}`).join(", ")}` : null,
      ].filter(Boolean);
      const roles = rolesLine(bytes, o.roles);
      const holders = o.top_holders || [];
      const labels = GM.distinctLabels(holders.map((t) => t.stack));
      return h("article", { class: `incident${o === opts.crash ? " crash" : ""}` },
        h("h4", {}, h("span", { class: `verdict ${o.verdict.replace(/ /g, "-")}` }, o.verdict),
          ` · OOM ${n} · GPU ${o.device}: ${bytes(o.requested)} requested at ${seconds(o.time_ns - t0)} (${o.api || o.op}${o.result ? ` → error ${o.result}` : ""})`,
          o === opts.crash ? h("span", { class: "muted" }, " · the run ended here") : null),
        o.explanation ? h("p", { class: "why" }, o.explanation) : null,
        o.cause ? causeLine(ui, o.cause, opts.growth || []) : null,
        o.advice ? h("p", { class: "advice" }, h("span", { class: "label" }, "Advice: "), o.advice) : null,
        h("p", { class: "facts" }, facts.join(" · ")),
        roles ? h("p", { class: "hint" }, `Live by role: ${roles}`) : null,
        h("div", { class: "incident-stacks" },
          h("div", {}, h("div", { class: "label" }, "The request, allocated here"), GM.stackCell(h, o.stack)),
          h("div", {}, h("div", { class: "label" }, "Top holders at that moment"),
            holders.length ? h("ol", { class: "holders" }, holders.map((t, i) =>
              h("li", {}, h("span", { class: "amount" }, `${bytes(t.bytes)} in ${t.count}`), GM.stackCell(h, t.stack, labels[i]))))
              : h("p", { class: "muted" }, "Nothing else was live."))));
    }));
  };

  GM.leaksTable = function (ui, leaks, emptyText) {
    const { h, bytes, table, stackCells } = ui;
    const cells = stackCells(leaks.map((l) => l.stack));
    return table(["Bytes", "Count", "GPU", "Level", "Kind", "Stack"], leaks.map((l, i) => [bytes(l.bytes), String(l.count), String(l.device),
      l.level, l.kind || "", l.suppressed ? h("span", {}, h("span", { class: "badge" }, `suppressed by ${l.suppressed_by}`), cells[i]) : cells[i]]),
    emptyText, [0, 1, 2]);
  };

  // Memory live at a clean exit that is not a leak: a CUDA library's workspace, or blocks the
  // program still referenced (docs/report.md, "held at exit").
  GM.heldTable = function (ui, held) {
    const { bytes, table, stackCells } = ui;
    const cells = stackCells(held.map((x) => x.stack));
    const why = (x) => (x.reason === "library" ? `held by ${x.library || "a library"}` : x.reason === "alive_at_exit" ? "still referenced at exit" : x.reason === "before_recording" ? "held since before the recording" : x.reason);
    return table(["Bytes", "Count", "GPU", "Level", "Why", "Stack"], held.map((x, i) => [bytes(x.bytes), String(x.count), String(x.device),
      x.level, why(x), cells[i]]), "", [0, 1, 2]);
  };

  GM.growthTable = function (ui, growth) {
    const { h, bytes, table, stackCells } = ui;
    const cells = stackCells(growth.map((g) => g.stack));
    return table(["Site", "GPU", "Level", "First", "Peak", "Final", "Rises", "Windows rising"],
      growth.map((g, i) => [h("div", {}, cells[i], g.advice ? h("div", { class: "advice" }, g.advice) : null), String(g.device), g.level,
        bytes(g.first_bytes), bytes(g.peak_bytes), bytes(g.final_bytes), String(g.rises), `${g.windows_rising} of ${g.windows_total}`]),
      "No call site keeps growing.", [1, 3, 4, 5, 6, 7]);
  };

  GM.fragmentationTable = function (ui, frag, t0) {
    const { bytes, seconds, table } = ui;
    return table(["GPU", "When", "Reserved", "Allocated", "Free in reserved", "Largest free block", "Fragmentation"],
      frag.flatMap((f) => [[String(f.device), `allocated peak (${seconds(f.peak_time_ns - t0)})`, f.at_peak]]
        .concat(f.at_ooms.map((a) => [String(f.device), `OOM at ${seconds(a.time_ns - t0)}`, a])))
        .map(([dev, when, pt]) => [dev, when, bytes(pt.reserved), bytes(pt.allocated), bytes(pt.free_in_reserved),
          bytes(pt.largest_free_block), pct(pt.ratio)]), "", [0, 2, 3, 4, 5, 6]);
  };

  GM.timeToOomTable = function (ui, ttoom) {
    const { bytes, seconds, table, stackCells } = ui;
    const cells = stackCells(ttoom.map((t) => t.stack));
    return table(["Site", "GPU", "Per step", "Steps", "Step every", "Free at the end", "Full after"],
      ttoom.map((t, i) => [cells[i], String(t.device), bytes(t.bytes_per_step), String(t.steps),
        t.seconds_per_step ? seconds(t.seconds_per_step * 1e9) : "–", bytes(t.free_bytes) + (t.free_known ? "" : " (if nothing else uses the device)"),
        `${Math.round(t.steps_left).toLocaleString("en")} steps` + (t.seconds_left === null ? "" : ` (${seconds(t.seconds_left * 1e9)})`)]),
      "", [1, 2, 3, 4, 5, 6]);
  };

  GM.failedCallsTable = function (ui, failed, t0) {
    const { bytes, seconds, table, stackCells } = ui;
    const cells = stackCells(failed.map((f) => f.stack));
    return table(["Call", "Error", "Size", "Count", "First at", "GPU", "Stack"], failed.map((f, i) => [f.api, `${f.error} (${f.result})`,
      bytes(f.size), String(f.count), ui.seconds(f.first_time_ns - t0), String(f.device), cells[i]]), "", [2, 3, 4, 5]);
  };

  GM.pinnedHost = function (ui, host, t0) {
    const { h, bytes, seconds, stat } = ui;
    return h("div", {}, h("div", { class: "stats" },
      stat("Peak", `${bytes(host.peak_bytes)}`, "accent"), stat("At", seconds(host.peak_time_ns - t0)),
      stat("Live at the end", bytes(host.live_bytes)), stat("Allocations", String(host.allocations)), stat("Frees", String(host.frees))),
    h("p", { class: "hint" }, "Page-locked host memory (cudaMallocHost, cudaHostAlloc, PyTorch's pinned tensors): the host's, not the GPU's."));
  };

  // The what-if table (docs/what-if.md) and the predicted reserved bytes of each setting over the
  // recorded run's (its replay, which matches the recording when "replay.faithful"), on the device's
  // axis (`chart`: app.js's step chart).
  GM.whatIfBlock = function (ui, w, t0, axis, chart) {
    const { h, bytes, table } = ui;
    const block = h("div", {});
    // A batch what-if's rows (docs/what-if.md, "Another batch size") name their batch.
    const rowName = (row) => (row.batch ? `batch ${row.batch}${row.settings ? ` with ${row.settings}` : ""} (predicted${row.estimate ? ", an estimate" : ""})` : row.settings);
    const r = w.replay;
    block.appendChild(h("p", { class: r.faithful ? "hint" : "warning" }, r.faithful
      ? `Replayed under ${w.recorded_settings || "the default settings"}, the model matches the recording: ${r.segment_ops_compared} segment operations, ${r.blocks_compared} blocks at the same offsets.`
      : `The replay differs from the recording at event ${r.divergence.seq}: ${r.divergence.what}. The figures are the model's.`));
    const from = { trace: "recorded in the trace", inferred: "inferred from the trace" }[w.settings_from] || w.settings_from;
    block.appendChild(h("p", { class: "hint" }, [`Settings of the run: ${w.recorded_settings || "the defaults"}${from ? ` (${from})` : ""}`,
      w.settings_option ? `--recorded-settings ${w.settings_option}` : "",
      w.settings_changes ? `changed ${w.settings_changes} times during the run` : "",
      w.capacity ? `replayed on a device of ${bytes(w.capacity)}` : "",
      (w.unmodeled_options || []).length ? `not modelled: ${w.unmodeled_options.join(", ")}` : ""].filter(Boolean).join("; ") + "."));
    block.appendChild(table(["Settings", "Reserved peak", "Allocated peak", "Fragmentation at the peak", "Cache flushes", "Retries"]
      .concat(w.ooms.map((o, i) => `OOM ${i + 1} (${bytes(o.requested)})`)),
    w.rows.map((row) => [row.recorded ? "recorded run" : GM.breakable(h, rowName(row)),
      bytes(row.reserved_peak) + (row.reserved_range ? ` (${bytes(row.reserved_range[0])} to ${bytes(row.reserved_range[1])})` : ""), bytes(row.allocated_peak),
      pct(row.at_peak.ratio), String(row.cache_flushes), String(row.retries)]
      .concat(row.ooms_still_happen.map((x) => (x ? "happens" : "avoided")))
      .concat(row.new_ooms ? [row.batch ? "runs out of memory" : `${row.new_ooms} new OOMs`] : []))));
    if (w.advice) block.appendChild(h("p", { class: "advice" }, w.advice));
    if (w.headroom) {
      block.appendChild(h("p", { class: "hint" }, `Headroom (an estimate): about ${w.headroom.factor_recorded.toFixed(1)}x the activations at the peak (${bytes(w.headroom.activation_bytes)}) would fit` +
        (w.headroom.best_settings ? `, ${w.headroom.factor_best.toFixed(1)}x with ${w.headroom.best_settings}` : "") +
        ", if activations scale with the batch and the rest stays as it was."));
    }
    const times = [...new Set(w.rows.flatMap((row) => row.timeline.map((s) => s.time_ns)))].sort((a, b) => a - b);
    if (times.length > 1) {
      const at = (timeline, t) => {
        let v = 0;
        for (const s of timeline) { if (s.time_ns > t) break; v = s.reserved; }
        return v;
      };
      const step = Math.max(1, Math.ceil(times.length / 2000));
      const kept = times.filter((_, i) => i % step === 0);
      const colors = ["#3867d6", "#20bf6b", "#8854d0", "#eb3b5a", "#0fb9b1", "#4b6584", "#f0932b"];
      const chartEl = h("div", { class: "timeline" });
      block.appendChild(chartEl);
      block.appendChild(h("p", { class: "hint" }, "PyTorch's reserved bytes over time: the recorded run and each setting's replay."));
      requestAnimationFrame(() => chart(chartEl, kept.map((t) => t - t0), w.rows.map((row, i) => ({
        label: row.recorded ? "recorded" : rowName(row), color: colors[i % colors.length], fill: colors[i % colors.length] + "1f",
        values: kept.map((t) => at(row.timeline, t)),
      })), axis, [], 240));
    }
    return block;
  };
})();
