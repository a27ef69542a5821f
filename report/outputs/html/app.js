// report/outputs/html/app.js — draws the HTML report from the `--format json` document embedded in
// the page (element #gpumem-data): per process, per device timelines (uPlot), flame graphs of the
// memory live at the peak, leaked and grown (d3-flame-graph), and tables. The views of the
// allocation timeline, the segment map, the top sites and the tests are in their own files
// (allocations_view.js, segment_view.js, sites_view.js, tests_view.js: window.GpuMem), called from here.
//
// Invariant: text from the trace (function names, files, labels) reaches the page only through
// textContent or d3's .text(), never as HTML. Keys this app does not know yet are shown as generic
// tables, so a newer report model still renders.
(function () {
  "use strict";

  const doc = JSON.parse(document.getElementById("gpumem-data").textContent);
  const root = document.getElementById("report");
  const KNOWN_TOP = ["summary", "processes", "leaks", "peaks", "ooms", "growth", "fragmentation", "spread", "what_if",
    "time_to_oom", "scopes", "top_sites", "stack_table", "allocation_timelines"];
  const GM = window.GpuMem || {};

  // The page's document keeps each distinct stack once (html_data.h): "stack" is an index into
  // stack_table. Put the frames back, with the text report's view of them as the array's `view`.
  (function restoreStacks(value) {
    const table = doc.stack_table || [];
    const visit = (v) => {
      if (Array.isArray(v)) { v.forEach(visit); return; }
      if (!v || typeof v !== "object") return;
      for (const [key, item] of Object.entries(v)) {
        if (key === "stack" && typeof item === "number" && table[item]) {
          const frames = table[item].frames.slice();
          frames.view = table[item].view;
          v.stack = frames;
        } else if (key !== "stack_table") {
          visit(item);
        }
      }
    };
    visit(value);
  })(doc);
  const KNOWN_PROCESS = ["file", "pid", "ppid", "exe", "cmdline", "host", "complete", "killed", "end", "exit_status",
    "signal", "truncated",
    "incomplete", "cut", "cut_at_ns", "events", "dropped_events", "duration_ns", "leaked_bytes", "warnings", "devices", "marks",
    "marks_total", "snapshot"];
  const TABLE_ROWS = 100;  // rows drawn per table; the rest are counted

  // --- DOM and formatting helpers ---------------------------------------------------------------
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v; else el.setAttribute(k, v);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function bytes(n) {
    if (n === undefined || n === null) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = Number(n), i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`;
  }

  function seconds(ns) {
    const s = Number(ns) / 1e9;
    if (Math.abs(s) >= 100) return `${s.toFixed(0)} s`;
    if (Math.abs(s) >= 1) return `${s.toFixed(2)} s`;
    if (Math.abs(s) >= 1e-3) return `${(s * 1e3).toFixed(1)} ms`;
    return `${(s * 1e6).toFixed(0)} µs`;
  }

  const basename = (path) => String(path || "").split("/").pop();
  const isBytesKey = (key) => /bytes$|^requested$|^reserved$|^allocated$|^total$|^device_free$|free_in_reserved|largest_free_block/.test(key);

  function frameText(f) {
    const where = f.file ? `${basename(f.file)}${f.line ? ":" + f.line : ""}` : basename(f.module);
    return (f.function || "??") + (where ? `  (${where})` : "");
  }

  // The profiler's and CUDA's own frames say nothing about the program; the first other frame is
  // what a table row is named after.
  const INTERNAL = /libgpumemtrace|libcudart|libcuda\.so|libcupti/;
  const isInternal = (f) => !f.lang && INTERNAL.test(f.module || "");
  function headline(stack) {
    if (stack && stack.view && stack.view.length) return stack.view[0];  // the text report's first line
    const frames = stack || [];
    const own = frames.find((f) => !isInternal(f));
    return own ? frameText(own) : frames.length ? frameText(frames[0]) : "(no stack)";
  }

  // A stack: its first line (the user's code, as the text report shows it); open, the text report's
  // view (libraries folded), and every recorded frame below that.
  function stackCell(stack) {
    const frames = stack || [];
    if (!frames.length) return h("span", { class: "muted" }, "(no stack)");
    const all = h("ol", {}, frames.map((f) => h("li", { class: f.lang === "python" ? "py" : isInternal(f) ? "internal" : "" },
      h("span", { class: "fn" }, f.function || "??"),
      f.file ? h("span", { class: "where" }, ` ${f.file}${f.line ? ":" + f.line : ""}`) :
        f.module ? h("span", { class: "where" }, ` ${f.module}`) : null)));
    if (!frames.view) return h("details", { class: "stack" }, h("summary", {}, headline(frames)), all);
    return h("details", { class: "stack" }, h("summary", {}, headline(frames)),
      h("ul", { class: "view" }, frames.view.map((line) => h("li", { class: /^\[/.test(line) ? "fold" : "" }, line))),
      h("details", { class: "frames" }, h("summary", {}, `all ${frames.length} frames`), all));
  }

  function table(headers, rows, emptyText) {
    if (!rows.length) return h("p", { class: "muted" }, emptyText || "None.");
    const shown = rows.slice(0, TABLE_ROWS);
    return h("div", { class: "table-wrap" },
      h("table", {}, h("thead", {}, h("tr", {}, headers.map((t) => h("th", {}, t)))),
        h("tbody", {}, shown.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))),
      rows.length > shown.length ? h("p", { class: "muted" }, `… and ${rows.length - shown.length} more`) : null);
  }

  function generic(value, key) {
    if (value === null || value === undefined) return "–";
    if (Array.isArray(value) && value.length && value.every((f) => f && typeof f === "object" && "function" in f)) {
      return stackCell(value);
    }
    if (typeof value === "number") return isBytesKey(key || "") ? bytes(value) : String(value);
    if (typeof value === "object") return h("code", {}, JSON.stringify(value));
    return String(value);
  }

  // A table for any list of objects the app has no dedicated view for.
  function genericTable(list) {
    if (!Array.isArray(list)) return h("p", {}, generic(list));
    const rows = list.filter((x) => x && typeof x === "object");
    const keys = [];
    for (const r of rows.slice(0, 20)) for (const k of Object.keys(r)) if (!keys.includes(k) && k !== "file") keys.push(k);
    return table(keys, rows.map((r) => keys.map((k) => generic(r[k], k))));
  }

  const section = (title, ...body) => h("section", { class: "card" }, h("h3", {}, title), ...body);
  const stat = (label, value, tone) => h("div", { class: `stat ${tone || ""}` }, h("div", { class: "label" }, label),
    h("div", { class: "value" }, value));
  // What the views in the other files (window.GpuMem) draw with.
  const ui = { h, bytes, seconds, table, section, stat, stackCell, headline };

  // --- timeline -----------------------------------------------------------------------------------
  const stepped = uPlot.paths.stepped({ align: 1 });

  // Vertical markers (peak, OOMs, phases) drawn over the plot; labels only while they stay legible.
  function markersPlugin(markers) {
    return {
      hooks: {
        draw: (u) => {
          const ctx = u.ctx, dpr = window.devicePixelRatio || 1;
          ctx.save();
          ctx.font = `${11 * dpr}px system-ui, sans-serif`;
          const labelled = markers.length <= 24;
          let row = 0;  // peak and OOM labels stack downwards: they often share a moment
          for (const m of markers) {
            const x = Math.round(u.valToPos(m.x, "x", true));
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
            ctx.strokeStyle = m.color;
            ctx.lineWidth = (m.kind === "mark" ? 1 : 2) * dpr;
            ctx.setLineDash(m.kind === "mark" ? [4 * dpr, 3 * dpr] : []);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            if (labelled || m.kind !== "mark") {
              ctx.fillStyle = m.color;
              const y = m.kind === "mark" ? u.bbox.top + u.bbox.height - 6 * dpr : u.bbox.top + (12 + 14 * row++) * dpr;
              const width = ctx.measureText(m.label).width;
              const left = x + 4 * dpr + width > u.bbox.left + u.bbox.width ? x - 4 * dpr - width : x + 4 * dpr;
              ctx.fillText(m.label, left, y);
            }
          }
          ctx.restore();
        },
      },
    };
  }

  function timelineSamples(process, device) {
    if (Array.isArray(device.timeline) && device.timeline.length) return device.timeline;
    const frag = doc.fragmentation.find((f) => f.pid === process.pid && f.file === process.file && f.device === device.device);
    return frag && frag.timeline && frag.timeline.length ? frag.timeline : null;
  }

  function timelineChart(el, samples, t0, markers) {
    const order = (k) => (k === "reserved" ? 0 : k === "allocated" ? 1 : 2);
    // A level that never held memory (allocated bytes in a trace without block data) is not a line.
    const keys = Object.keys(samples[0]).filter((k) => k !== "time_ns" && typeof samples[0][k] === "number")
      .filter((k) => k === "reserved" || samples.some((s) => s[k] > 0))
      .sort((a, b) => order(a) - order(b));
    const palette = { reserved: "#3867d6", allocated: "#f0932b" };
    const extra = ["#20bf6b", "#8854d0", "#eb3b5a", "#0fb9b1", "#4b6584"];
    const data = [samples.map((s) => (s.time_ns - t0) / 1e9), ...keys.map((k) => samples.map((s) => s[k]))];
    const series = [{ label: "time", value: (u, v) => (v === null ? "–" : seconds(v * 1e9)) }, ...keys.map((k, i) => {
      const color = palette[k] || extra[i % extra.length];
      // Memory stays at a level until the next event changes it: steps, never slopes.
      return { label: k, stroke: color, width: 1.5, fill: color + "1f", paths: stepped,
        value: (u, v) => (v === null ? "–" : bytes(v)) };
    })];
    const width = Math.max(320, el.clientWidth || 900);
    const opts = {
      width, height: 260, series, plugins: [markersPlugin(markers)],
      scales: { x: { time: false } },
      axes: [{ values: (u, vals) => vals.map((v) => seconds(v * 1e9)) },
        { size: 72, values: (u, vals) => vals.map((v) => bytes(v)) }],
      legend: { live: true },
    };
    const plot = new uPlot(opts, data, el);
    new ResizeObserver(() => plot.setSize({ width: Math.max(320, el.clientWidth), height: 260 })).observe(el);
  }

  // Reserved memory by role (samples' "roles"), stacked: each series is the running total up to its
  // role, drawn from the top down so that each fill covers the one below; the legend shows each
  // role's own bytes.
  function rolesChart(el, samples, t0, markers) {
    const withRoles = samples.filter((s) => s.roles);
    const names = Object.keys(withRoles[0].roles).filter((k) => withRoles.some((s) => s.roles[k] > 0));
    const colors = ["#3867d6", "#eb3b5a", "#8854d0", "#f0932b", "#20bf6b", "#0fb9b1", "#a5b1c2", "#4b6584"];
    const x = withRoles.map((s) => (s.time_ns - t0) / 1e9);
    const own = names.map((k) => withRoles.map((s) => s.roles[k]));
    const cumulative = own.map((_, i) => withRoles.map((s, j) => own.slice(0, i + 1).reduce((a, r) => a + r[j], 0)));
    const order = names.map((_, i) => names.length - 1 - i);
    const series = [{ label: "time", value: (u, v) => (v === null ? "–" : seconds(v * 1e9)) }, ...order.map((i) => ({
      label: names[i], stroke: colors[i % colors.length], width: 1, fill: colors[i % colors.length] + "99", paths: stepped,
      value: (u, v, si, di) => (di === null || di === undefined ? "–" : bytes(own[i][di])),
    }))];
    const width = Math.max(320, el.clientWidth || 900);
    const plot = new uPlot({
      width, height: 220, series, plugins: [markersPlugin(markers)], scales: { x: { time: false } },
      axes: [{ values: (u, vals) => vals.map((v) => seconds(v * 1e9)) },
        { size: 72, values: (u, vals) => vals.map((v) => bytes(v)) }],
      legend: { live: true },
    }, [x, ...order.map((i) => cumulative[i])], el);
    new ResizeObserver(() => plot.setSize({ width: Math.max(320, el.clientWidth), height: 220 })).observe(el);
  }

  // --- flame graphs --------------------------------------------------------------------------------
  // A tree of stacks, root first: every node carries the bytes and count of the items below it.
  function stackTree(items, rootName) {
    const root = { name: rootName, value: 0, count: 0, children: [], map: new Map() };
    for (const item of items) {
      if (!item.bytes) continue;
      let node = root;
      root.value += item.bytes;
      root.count += item.count || 0;
      const path = [...(item.prefix || []), ...[...(item.stack || [])].reverse()];
      if (!path.length) path.push({ function: "(no stack)" });
      for (const f of path) {
        const key = `${f.function}\u0000${f.file || f.where || f.module || ""}\u0000${f.line || ""}`;
        let child = node.map.get(key);
        if (!child) {
          child = { name: f.function || "??", frame: f, value: 0, count: 0, children: [], map: new Map() };
          node.map.set(key, child);
          node.children.push(child);
        }
        child.value += item.bytes;
        child.count += item.count || 0;
        node = child;
      }
    }
    const strip = (n) => { delete n.map; n.children.forEach(strip); return n; };
    return strip(root);
  }

  function flameColor(d) {
    const f = d.data.frame;
    if (!f) return "#b8c2cc";
    if (f.kind) return { p: "#6a9fd8", u: "#f39c6b", l: "#f6c177", i: "#c8ced6" }[f.kind] || "#d6dbe0";
    if (f.lang === "python") return "#6a9fd8";
    if (isInternal(f)) return "#c8ced6";
    if (/^\[/.test(f.function || "")) return "#d6dbe0";
    return /\.so/.test(f.module || "") ? "#f6c177" : "#f39c6b";
  }

  function flameGraph(el, tree, unit) {
    const amount = (v) => (unit ? `${v.toLocaleString("en")} ${unit}` : bytes(v));
    if (!tree.value) { el.appendChild(h("p", { class: "muted" }, "Nothing to show.")); return; }
    const describe = (d) => {
      const f = d.data.frame;
      const where = f && f.file ? `\n${f.file}${f.line ? ":" + f.line : ""}` : f && f.where ? `\n${f.where}` : f && f.module ? `\n${f.module}` : "";
      const share = tree.value ? ` (${(100 * d.data.value / tree.value).toFixed(1)}%)` : "";
      return unit ? `${d.data.name}${where}\n${amount(d.data.value)}${share}`
        : `${d.data.name}${where}\n${bytes(d.data.value)}${share} in ${d.data.count} allocation${d.data.count === 1 ? "" : "s"}`;
    };
    const tip = flamegraph.tooltip.defaultFlamegraphTooltip().text(describe);
    const chart = flamegraph.default()
      .width(Math.max(320, el.clientWidth || 900))
      .cellHeight(20).minFrameSize(1).transitionDuration(250).sort(true).inverted(true)
      .selfValue(false).title("").tooltip(tip).setLabelHandler(describe)
      .setColorMapper((d) => flameColor(d));
    d3.select(el).datum(tree).call(chart);
    el.appendChild(h("p", { class: "hint" }, "Click a frame to zoom in, click the root to zoom out; hover for bytes and count."));
  }

  // Tabs over one flame graph area: peak (reserved / allocated), leaks, growth.
  // A view's items may be a function, called each time its tab is shown (the moment chosen on the
  // allocation timeline changes what it holds); `refresh` redraws the tab shown.
  function flameTabs(views) {
    const itemsOf = (v) => (typeof v.items === "function" ? v.items() : v.items);
    const available = views.filter((v) => typeof v.items === "function" || v.items.some((i) => i.bytes > 0));
    if (!available.length) return h("p", { class: "muted" }, "No stacks hold memory at the peak, at exit or in growth.");
    const area = h("div", { class: "flame" });
    const buttons = available.map((v) => h("button", { type: "button" }, v.title));
    const show = (i) => {
      buttons.forEach((b, j) => b.classList.toggle("active", i === j));
      area.replaceChildren();
      area.appendChild(h("p", { class: "hint" }, available[i].caption));
      const graph = h("div", {});
      area.appendChild(graph);
      flameGraph(graph, stackTree(itemsOf(available[i]), available[i].root), available[i].unit);
      shown = i;
    };
    let shown = 0;
    buttons.forEach((b, i) => b.addEventListener("click", () => show(i)));
    const wrap = h("div", {}, h("div", { class: "tabs" }, buttons), area);
    wrap.refresh = (title) => { if (available[shown] && available[shown].title === title) show(shown); };
    requestAnimationFrame(() => show(0));
    return wrap;
  }

  // --- one process ---------------------------------------------------------------------------------
  function ofProcess(list, p) {
    return (list || []).filter((x) => x.pid === p.pid && x.file === p.file);
  }
  const timelineOf = (p) => ofProcess(doc.allocation_timelines, p)[0] || null;
  function leakingTests(p) {
    const n = ofProcess(doc.scopes, p).filter((s) => s.leaked_bytes > 0).length;
    return n ? `${n} test${n === 1 ? "" : "s"} or scope${n === 1 ? "" : "s"}` : "";
  }

  function processT0(p, peaks, ooms) {
    const detail = timelineOf(p);
    if (detail) return detail.t0_ns;  // the allocation timeline's times count from the first event
    const times = [];
    for (const d of p.devices) {
      const s = timelineSamples(p, d);
      if (s) times.push(s[0].time_ns);
    }
    for (const m of p.marks) times.push(m.time_ns);
    for (const o of ooms) times.push(o.time_ns);
    for (const k of peaks) times.push(k.time_ns);
    return times.length ? Math.min(...times) : 0;
  }

  function deviceBlock(p, d, peak, ooms, t0) {
    const stats = h("div", { class: "stats" },
      stat("Peak reserved", bytes(d.peak_bytes), "accent"),
      d.peak_allocated_bytes ? stat("Peak allocated", bytes(d.peak_allocated_bytes)) : null,
      // A snapshot is a moment of the run: what was live then, never "at exit".
      p.snapshot ? stat("Live at the snapshot", bytes(d.alive_at_exit_bytes))
        : stat("Leaked at exit", bytes(d.leaked_bytes), d.leaked_bytes ? "bad" : "good"),
      stat("OOMs / failed", String(ooms.length), ooms.length ? "bad" : "good"),
      d.total ? stat("Device memory", bytes(d.total)) : null,
      stat("Allocations", String(d.allocations + (d.block_allocations || 0))));
    const chartEl = h("div", { class: "timeline" });
    const block = h("div", { class: "device" },
      h("h3", {}, `GPU ${d.device}`, d.name ? h("span", { class: "muted" }, ` · ${d.name}`) : null), stats, chartEl);
    const samples = timelineSamples(p, d);
    const markers = [];
    if (peak) markers.push({ x: (peak.time_ns - t0) / 1e9, color: "#3867d6", kind: "peak", label: `peak ${bytes(peak.bytes)}` });
    if (peak && peak.allocated) markers.push({ x: (peak.allocated.time_ns - t0) / 1e9, color: "#e17b12", kind: "peak", label: `allocated peak ${bytes(peak.allocated.bytes)}` });
    for (const o of ooms) markers.push({ x: (o.time_ns - t0) / 1e9, color: "#d63031", kind: "oom", label: o.verdict ? `OOM (${o.verdict})` : "OOM" });
    for (const s of ofProcess(doc.scopes, p)) {
      if (s.leaked_bytes) markers.push({ x: (s.end_time_ns - t0) / 1e9, color: "#8854d0", kind: "scope", label: `${s.name} leaked ${bytes(s.leaked_bytes)}` });
    }
    for (const m of p.marks) markers.push({ x: (m.time_ns - t0) / 1e9, color: "#7f8c8d", kind: "mark", label: m.label });
    for (const key of ["scopes", "phases"]) {
      for (const s of p[key] || []) if (s && s.start_ns !== undefined) markers.push({ x: (s.start_ns - t0) / 1e9, color: "#8854d0", kind: "mark", label: s.name || s.label || key });
    }
    if (samples) {
      const mainEl = h("div", {});
      chartEl.appendChild(mainEl);
      requestAnimationFrame(() => timelineChart(mainEl, samples, t0, markers));
      if (samples.some((s) => s.roles)) {
        const rolesEl = h("div", { class: "timeline" });
        chartEl.appendChild(h("p", { class: "hint" }, "Reserved memory by role (docs/report.md, \"Memory by role\"), stacked:"));
        chartEl.appendChild(rolesEl);
        requestAnimationFrame(() => rolesChart(rolesEl, samples, t0, markers));
      }
      chartEl.appendChild(h("p", { class: "hint" }, `${samples.length} samples, evenly thinned from the trace; lines mark the peak (blue), OOMs and failed allocations (red) and marks (grey).`));
    } else {
      chartEl.appendChild(h("p", { class: "muted" }, "No timeline for this device in the report (the analyzer keeps one for devices with caching-allocator blocks)."));
    }
    if (markers.length) {
      block.appendChild(h("ul", { class: "markers" }, markers.filter((m) => m.kind !== "mark").map((m) =>
        h("li", {}, h("span", { class: "dot", style: `background:${m.color}` }), `${m.label} at ${seconds(m.x * 1e9)}`))));
    }
    if (peak) {
      const culprits = (peak.allocated && peak.allocated.culprits.length ? peak.allocated : peak);
      block.appendChild(h("h4", {}, `Live at the ${culprits === peak ? "" : "allocated "}peak: ${bytes(culprits.bytes)}`,
        culprits.phase ? h("span", { class: "muted" }, ` · in phase “${culprits.phase}”`) : null));
      block.appendChild(table(["Bytes", "Share", "Count", "Stack"], culprits.culprits.map((c) =>
        [bytes(c.bytes), c.share !== undefined ? `${(100 * c.share).toFixed(1)}%` : "–", String(c.count), stackCell(c.stack)])
        .concat(culprits.other_bytes ? [[bytes(culprits.other_bytes), "", "", "other stacks"]] : [])));
    }
    return block;
  }

  // The what-if table (docs/what-if.md) and the predicted reserved bytes of each setting over the
  // recorded run's (its replay, which matches the recording when "replay.faithful").
  function whatIfBlock(w, t0) {
    const block = h("div", {});
    // A batch what-if's rows (docs/what-if.md, "Another batch size") name their batch.
    const rowName = (row) => (row.batch ? `batch ${row.batch}${row.settings ? ` with ${row.settings}` : ""} (predicted${row.estimate ? ", an estimate" : ""})` : row.settings);
    const r = w.replay;
    block.appendChild(h("p", { class: r.faithful ? "hint" : "warning" }, r.faithful
      ? `Replayed under ${w.recorded_settings || "the default settings"}, the model matches the recording: ${r.segment_ops_compared} segment operations, ${r.blocks_compared} blocks at the same offsets.`
      : `The replay differs from the recording at event ${r.divergence.seq}: ${r.divergence.what}. The figures are the model's.`));
    block.appendChild(table(["Settings", "Reserved peak", "Allocated peak", "Fragmentation at the peak", "Cache flushes", "Retries"]
      .concat(w.ooms.map((o, i) => `OOM ${i + 1} (${bytes(o.requested)})`)),
      w.rows.map((row) => [row.recorded ? "recorded run" : rowName(row),
        bytes(row.reserved_peak) + (row.reserved_range ? ` (${bytes(row.reserved_range[0])} to ${bytes(row.reserved_range[1])})` : ""), bytes(row.allocated_peak),
        `${(100 * row.at_peak.ratio).toFixed(0)}%`, String(row.cache_flushes), String(row.retries)]
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
      const samples = times.filter((_, i) => i % step === 0).map((t) => {
        const s = { time_ns: t };
        w.rows.forEach((row) => { s[row.recorded ? "recorded" : rowName(row)] = at(row.timeline, t); });
        return s;
      });
      const chartEl = h("div", { class: "timeline" });
      block.appendChild(chartEl);
      block.appendChild(h("p", { class: "hint" }, "PyTorch's reserved bytes over time: the recorded run and each setting's replay."));
      requestAnimationFrame(() => timelineChart(chartEl, samples, t0, []));
    }
    return block;
  }

  function processSection(p) {
    const leaks = ofProcess(doc.leaks, p), peaks = ofProcess(doc.peaks, p), ooms = ofProcess(doc.ooms, p);
    const growth = ofProcess(doc.growth, p), frag = ofProcess(doc.fragmentation, p);
    const t0 = processT0(p, peaks, ooms);
    const multiDevice = p.devices.length > 1;
    const devicePrefix = (x) => (multiDevice ? [{ function: `GPU ${x.device}` }] : []);
    const el = h("section", { class: "process", id: `pid-${p.pid}` });
    el.appendChild(h("h2", {}, basename(p.exe) || basename(p.file),
      h("span", { class: "muted" }, p.snapshot ? " · PyTorch snapshot" : ` · pid ${p.pid}`)));
    el.appendChild(h("p", { class: "meta" }, [(p.cmdline || []).join(" "), p.host ? `on ${p.host}` : "",
      `${p.events} events over ${seconds(p.duration_ns)}`, endedAs(p), basename(p.file)].filter(Boolean).join(" · ")));
    const flags = [];
    if (p.cut) flags.push(`INCOMPLETE: cut at ${seconds(p.cut_at_ns)}: the analysis covers up to ${seconds(p.cut_at_ns)}; ` +
      "the leaks shown are what was live when the trace was cut, not leaks");
    if (p.truncated) flags.push("the trace is cut short");
    if (p.end === "signal") flags.push(`killed by ${p.signal}: what was live then is listed under Leaks as live when killed, not leaks`);
    if (p.incomplete) flags.push(`${p.dropped_events} events were dropped: figures are incomplete`);
    for (const w of flags.concat(p.warnings || [])) el.appendChild(h("p", { class: "warning" }, w));

    const moment = { t: null, level: "blocks", listeners: [] };  // the moment chosen on an allocation timeline
    for (const d of p.devices) {
      const peak = peaks.find((k) => k.device === d.device);
      el.appendChild(section(`Memory over time`, deviceBlock(p, d, peak, ooms.filter((o) => o.device === d.device), t0)));
      const allocations = allocationsSection(p, d, ooms.filter((o) => o.device === d.device), t0, moment);
      if (allocations) el.appendChild(allocations);
    }

    // Where a caching allocator reports its blocks, they (not its segments) say who holds memory.
    const views = [
      { title: "Allocated at peak", root: "allocated at the peak", caption: "Caching-allocator blocks live at the allocated peak, by stack (root at the top).",
        items: peaks.filter((k) => k.allocated).flatMap((k) => k.allocated.culprits.map((c) => ({ ...c, prefix: devicePrefix(k) }))
          .concat([{ bytes: k.allocated.other_bytes, count: 0, prefix: devicePrefix(k), stack: [{ function: "[other stacks]" }] }])) },
      { title: "Reserved at peak", root: "reserved at the peak", caption: "CUDA allocations live at each device's reserved peak, by stack (root at the top).",
        items: peaks.flatMap((k) => k.culprits.map((c) => ({ ...c, prefix: devicePrefix(k) }))
          .concat([{ bytes: k.other_bytes, count: 0, prefix: devicePrefix(k), stack: [{ function: "[other stacks]" }] }])) },
      { title: "Leaks", root: "leaked", caption: "Memory still allocated when the trace ends (suppressed leaks left out), by stack.",
        items: leaks.filter((l) => !l.suppressed).map((l) => ({ ...l, prefix: devicePrefix(l) })) },
      { title: "Growth", root: "growth", caption: "How much each growing call site rose from its first high-water mark to its highest.",
        items: growth.map((g) => ({ ...g, prefix: devicePrefix(g) })) },
    ];
    const flames = flameTabs(detailFlames(p, views, ooms, t0, moment, devicePrefix));
    moment.listeners.push(() => flames.refresh("At the chosen moment"));
    el.appendChild(section("Flame graphs", flames));

    const leaksTitle = p.end === "signal" ? "Live when killed, not leaks" : p.cut ? "Live when the trace was cut, not leaks" : "Leaks";
    el.appendChild(section(`${leaksTitle} (${leaks.filter((l) => !l.suppressed).length})`, table(
      ["Bytes", "Count", "GPU", "Level", "Kind", "Stack"],
      leaks.map((l) => [bytes(l.bytes), String(l.count), String(l.device), l.level, l.kind || "",
        l.suppressed ? h("span", {}, h("span", { class: "badge" }, `suppressed by ${l.suppressed_by}`), stackCell(l.stack)) : stackCell(l.stack)]),
      leakingTests(p) ? `Nothing leaked at exit; ${leakingTests(p)} leaked during the run (see Tests).` : "No leaks.")));

    el.appendChild(section(`OOMs and failed allocations (${ooms.length})`, table(
      ["At", "GPU", "Call", "Requested", "Live", "Device free", "Verdict", "Why, and advice", "Stack", "Top holders"],
      ooms.map((o) => [seconds(o.time_ns - t0), String(o.device), `${o.api || o.op}${o.result ? ` → error ${o.result}` : ""}`,
        bytes(o.requested), bytes(o.live_bytes) + (o.allocated_bytes ? ` (${bytes(o.allocated_bytes)} in blocks)` : ""),
        o.device_free === null ? "unknown" : `${bytes(o.device_free)}${o.device_total ? ` of ${bytes(o.device_total)}` : ""}`,
        h("span", { class: `verdict ${o.verdict}` }, o.verdict),
        h("div", {}, o.phase ? h("div", {}, `phase “${o.phase}”`) : null,
          o.fragmentation ? h("div", {}, `largest free block ${bytes(o.fragmentation.largest_free_block)} of ${bytes(o.fragmentation.free_in_reserved)} free in reserved`) : null,
          o.explanation ? h("div", { class: "why" }, o.explanation) : null,
          o.advice ? h("div", { class: "advice" }, generic(o.advice, "advice")) : null),
        stackCell(o.stack),
        h("div", {}, (o.top_holders || []).slice(0, 3).map((t) => h("div", {}, `${bytes(t.bytes)} · ${headline(t.stack)}`)))]),
      "No OOM and no failed allocation.")));

    el.appendChild(section(`Growth (${growth.length})`, table(
      ["Site", "GPU", "Level", "First", "Peak", "Final", "Rises", "Windows rising"],
      growth.map((g) => [stackCell(g.stack), String(g.device), g.level, bytes(g.first_bytes), bytes(g.peak_bytes),
        bytes(g.final_bytes), String(g.rises), `${g.windows_rising} of ${g.windows_total}`]),
      "No call site keeps growing.")));

    if (frag.length) {
      el.appendChild(section("Fragmentation", table(
        ["GPU", "When", "Reserved", "Allocated", "Free in reserved", "Largest free block", "Fragmentation"],
        frag.flatMap((f) => [[String(f.device), `allocated peak (${seconds(f.peak_time_ns - t0)})`, f.at_peak]]
          .concat(f.at_ooms.map((a) => [String(f.device), `OOM at ${seconds(a.time_ns - t0)}`, a])))
          .map(([dev, when, pt]) => [dev, when, bytes(pt.reserved), bytes(pt.allocated), bytes(pt.free_in_reserved),
            bytes(pt.largest_free_block), `${(100 * pt.ratio).toFixed(0)}%`]))));
    }
    for (const w of ofProcess(doc.what_if, p)) el.appendChild(section(`What if (GPU ${w.device}): PyTorch's allocator replayed`, whatIfBlock(w, t0)));
    const ttoom = ofProcess(doc.time_to_oom, p);
    if (ttoom.length) {
      el.appendChild(section("Time to OOM (an estimate, at the rate measured)", table(
        ["Site", "GPU", "Per step", "Steps", "Step every", "Free at the end", "Full after"],
        ttoom.map((t) => [stackCell(t.stack), String(t.device), bytes(t.bytes_per_step), String(t.steps),
          t.seconds_per_step ? seconds(t.seconds_per_step * 1e9) : "–", bytes(t.free_bytes) + (t.free_known ? "" : " (if nothing else uses the device)"),
          `${Math.round(t.steps_left).toLocaleString("en")} steps` + (t.seconds_left === null ? "" : ` (${seconds(t.seconds_left * 1e9)})`)]))));
    }
    const tests = ofProcess(doc.scopes, p);
    if (tests.length && GM.testsView) el.appendChild(section(`Tests and scopes (${tests.length})`, GM.testsView(ui, tests, t0)));
    const sites = ofProcess(doc.top_sites, p);
    if (sites.length && GM.sitesView) el.appendChild(section("Top call sites", GM.sitesView(ui, sites)));
    if (p.marks.length) {
      el.appendChild(section(`Marks (${p.marks_total})`, h("details", {}, h("summary", {}, "Show the marks"),
        table(["At", "Label"], p.marks.map((m) => [seconds(m.time_ns - t0), m.label])))));
    }
    // Keys of newer report models (held_at_exit, scopes, roles, ...): shown as they come.
    for (const [key, value] of Object.entries(p)) {
      if (!KNOWN_PROCESS.includes(key)) el.appendChild(section(key.replace(/_/g, " "), genericTable(value)));
    }
    for (const [key, value] of Object.entries(doc)) {
      if (!KNOWN_TOP.includes(key) && Array.isArray(value)) {
        const mine = value.filter((x) => !x || x.pid === undefined || (x.pid === p.pid && (x.file === undefined || x.file === p.file)));
        // A snapshot's live blocks are live at that moment, not at an exit.
        const title = p.snapshot && key === "held_at_exit" ? "live when the snapshot was taken" : key.replace(/_/g, " ");
        if (mine.length) el.appendChild(section(title, genericTable(mine)));
      }
    }
    return el;
  }

  // --- the allocation timeline's views (allocations_view.js, segment_view.js) ------------------------
  function allocationsSection(p, d, ooms, t0, moment) {
    const tl = timelineOf(p);
    const detail = tl && tl.devices.find((x) => x.device === d.device);
    if (!detail || !GM.allocationsView) return null;
    const view = GM.allocationsView(ui, {
      timeline: tl, device: detail,
      marks: p.marks.map((m) => ({ time: m.time_ns - t0, label: m.label })),
      ooms: ooms.map((o) => ({ time: o.time_ns - t0, requested: o.requested, verdict: o.verdict })),
      scopes: ofProcess(doc.scopes, p).map((s) => ({ name: s.name, begin: s.begin_time_ns - t0, end: s.end_time_ns - t0, leaked: s.leaked_bytes > 0 })),
      onSelect: (t, level) => { moment.t = t; moment.level = level; moment.device = d.device; moment.listeners.forEach((f) => f()); },
    });
    return section(`Every allocation · GPU ${d.device}`, view.element);
  }

  // Flame graphs from the allocation timeline, where the page has one: every allocation live at the
  // peaks (not only the largest culprits), at each OOM and at a moment chosen on the timeline, and
  // each call site's bytes, allocations and temporary allocations over the run.
  function detailFlames(p, views, ooms, t0, moment, devicePrefix) {
    const tl = timelineOf(p);
    if (!tl || !GM.decodeLevel) return views;
    const decoded = new Map();
    const levelOf = (dev, key) => {
      const id = `${dev.device}/${key}`;
      if (!decoded.has(id)) decoded.set(id, GM.decodeLevel(dev[key]));
      return decoded.get(id);
    };
    const byStack = (dev, key, t) => {
      const L = levelOf(dev, key), sums = new Map();
      for (const i of GM.liveAt(L, t)) {
        const s = sums.get(L.stack[i]) || { bytes: 0, count: 0 };
        s.bytes += L.size[i]; s.count += 1;
        sums.set(L.stack[i], s);
      }
      return [...sums].map(([stack, s]) => ({ bytes: s.bytes, count: s.count, prefix: devicePrefix(dev), stack: GM.stackFrames(tl, stack) }));
    };
    const atPeaks = (key) => tl.devices.filter((dev) => dev[key]).flatMap((dev) => byStack(dev, key, dev[key].peak.time));
    const out = views.slice();
    if (tl.devices.some((dev) => dev.blocks)) {
      out[0] = { ...views[0], caption: "Every caching-allocator block live at the allocated peak, by stack (root at the top).", items: atPeaks("blocks") };
    }
    out[1] = { ...views[1], caption: "Every CUDA allocation live at the reserved peak, by stack (root at the top).", items: atPeaks("memory") };
    ooms.forEach((o, i) => {
      const dev = tl.devices.find((x) => x.device === o.device);
      if (!dev) return;
      const key = dev.blocks ? "blocks" : "memory";
      out.push({ title: `At OOM ${i + 1}`, root: `live at OOM ${i + 1}`, caption: `What was live when ${bytes(o.requested)} could not be allocated (${o.verdict}).`,
        items: byStack(dev, key, o.time_ns - t0) });
    });
    const sites = (what) => tl.devices.flatMap((dev) => ["blocks", "memory"].filter((k) => dev[k]).flatMap((k) =>
      dev[k].sites.map((s) => ({ bytes: what(s), count: s[2], prefix: devicePrefix(dev).concat(tl.devices.some((x) => x.blocks) ? [{ function: k === "blocks" ? "tensors" : "CUDA level" }] : []),
        stack: GM.stackFrames(tl, s[0]) }))));
    out.push({ title: "Bytes allocated", root: "allocated over the run", caption: "Bytes each call site allocated over the whole run.", items: sites((s) => s[1]) });
    out.push({ title: "Allocations", root: "allocations", unit: "allocations", caption: "How many allocations each call site made (a frame's width: its count).", items: sites((s) => s[2]) });
    out.push({ title: "Temporary", root: "temporary allocations", caption: "Bytes of allocations freed within 1 ms of being made (churn), by call site.", items: sites((s) => s[3]) });
    out.push({ title: "At the chosen moment", root: "live at the chosen moment",
      caption: "What was live at the moment chosen on an allocation timeline (click one); at first, the peak.",
      items: () => {
        const dev = tl.devices.find((x) => x.device === moment.device) || tl.devices[0];
        const key = dev[moment.level] ? moment.level : dev.blocks ? "blocks" : "memory";
        return byStack(dev, key, moment.t === null ? dev[key].peak.time : moment.t);
      } });
    return out;
  }

  // How the process ended (docs/report.md, "How the process ended").
  function endedAs(p) {
    if (p.snapshot) return "a PyTorch snapshot: a moment of the run, not its end";
    if (!p.complete) return "no footer";
    const status = p.exit_status === null || p.exit_status === undefined ? "" : ` ${p.exit_status}`;
    if (p.end === "signal") return `killed by ${p.signal}`;
    if (p.end === "exit") return `exit${status}`;
    if (p.end === "_exit") return `_exit${status}`;
    if (p.end === "exec") return "exec";
    return "clean exit";
  }

  // --- the spread across ranks (a directory of traces) ----------------------------------------------
  function spreadSection() {
    const peakMax = Math.max(1, ...doc.processes.map((p) => Math.max(0, ...p.devices.map((d) => d.peak_bytes))));
    const rows = doc.processes.map((p) => {
      const peak = Math.max(0, ...p.devices.map((d) => d.peak_bytes));
      return [h("a", { href: `#pid-${p.pid}` }, `pid ${p.pid}`), basename(p.file), p.host || "",
        h("div", { class: "bar-cell" }, h("div", { class: "bar", style: `width:${(100 * peak / peakMax).toFixed(1)}%` }), bytes(peak)),
        bytes(p.leaked_bytes), String(ofProcess(doc.ooms, p).length), String(p.events), endedAs(p)];
    });
    const s = doc.spread || {};
    const line = (name, m) => (m ? h("p", {}, `${name}: min ${bytes(m.min)} (pid ${m.min_pid}), max ${bytes(m.max)} (pid ${m.max_pid}), mean ${bytes(Math.round(m.mean))}`) : null);
    const drawn = doc.process_groups ? ` (${doc.processes.length} drawn in full)` : "";
    return section(`Across ${doc.summary.processes} processes${drawn}`, line("Peak", s.peak_bytes), line("Leaked", s.leaked_bytes),
      table(["Process", "Trace", "Host", "Peak", "Leaked", "OOMs", "Events", "Ended"], rows));
  }

  // A run of many processes (process_groups.h): the ones not drawn in full, summed by executable and rank.
  function groupsSection() {
    const g = doc.process_groups;
    const row = (name, x) => [name, String(x.processes), x.first_pid !== undefined ? `pid ${x.first_pid}` : "", bytes(x.peak_bytes.min),
      bytes(x.peak_bytes.max), bytes(x.leaked_bytes), String(x.ooms), String(x.events), String(x.cut + x.killed_by_signal)];
    const rows = g.groups.map((x) => row(`${basename(x.exe) || "(not recorded)"}${x.rank === null ? "" : ` rank ${x.rank}`}`, x));
    if (g.other) rows.push(row(`${g.other.groups} more executables and ranks`, g.other));
    return section(`${g.processes} more processes, summed by executable and rank`,
      h("p", { class: "muted" }, `Of ${doc.summary.processes} processes, the ${doc.processes.length} that tell the most are drawn in full (an OOM first, then a leak, growth or a cut trace, then the largest peak).`),
      table(["Executable", "Processes", "First", "Lowest peak", "Highest peak", "Leaked", "OOMs", "Events", "Cut or killed"], rows));
  }

  function render() {
    const s = doc.summary;
    root.appendChild(h("header", {}, h("h1", {}, "GPU memory report"),
      h("p", { class: "meta" }, `gpumemtrace · ${s.processes} process${s.processes === 1 ? "" : "es"} · ${s.events} events`)));
    const snapshots = doc.processes.length && doc.processes.every((p) => p.snapshot);  // moments, not exits
    root.appendChild(h("div", { class: "stats top" },
      stat("Peak", bytes(s.peak_bytes), "accent"),
      snapshots ? stat("Live at the snapshot", bytes(s.alive_at_exit_bytes))
        : stat("Leaked at exit", `${bytes(s.leaked_bytes)} in ${s.leaked_count}`, s.leaked_bytes ? "bad" : "good"),
      // A test's leak is freed by the end of the run, so it is not among the leaks at exit: its own card.
      s.scopes ? stat("Tests that leaked", `${s.leaking_scopes} of ${s.scopes}` +
        (s.leaking_scopes ? ` · ${bytes((doc.scopes || []).reduce((a, x) => a + (x.leaked_bytes || 0), 0))}` : ""),
      s.leaking_scopes ? "bad" : "good") : null,
      stat("OOMs / failed", String(s.ooms), s.ooms ? "bad" : "good"),  // summed processes' too
      stat("Growing sites", String(doc.growth.length), doc.growth.length ? "warn" : "good"),
      stat(snapshots ? "Cached at the snapshot" : "Cached at exit", bytes(s.cached_bytes)),
      stat("Trace", s.incomplete ? "incomplete" : s.complete ? "complete" : "cut short", s.incomplete || !s.complete ? "warn" : "good")));
    if (doc.processes.length > 1) root.appendChild(spreadSection());
    if (doc.process_groups) root.appendChild(groupsSection());
    for (const p of doc.processes) root.appendChild(processSection(p));
    root.appendChild(h("footer", {}, "Made by gpumem-report. Everything is in this one file; it makes no network request."));
    // Charts draw in animation frames queued during render(); this one runs after them.
    requestAnimationFrame(() => {
      document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
      document.body.setAttribute("data-rendered", "true");
    });
  }

  try {
    render();
  } catch (error) {
    root.appendChild(h("p", { class: "warning" }, `The report could not be drawn: ${error}`));
    document.body.setAttribute("data-rendered", "error");
    throw error;
  }
})();
