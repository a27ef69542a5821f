// report/outputs/html/app.js — draws the HTML report from the `--format json` document embedded in
// the page (element #gpumem-data), in the order a person reads a run: what went wrong first (an
// out-of-memory error, then what filled the device, then the fix; or the leaks, the growth, the
// tests that leaked), then the memory over time per device, every allocation, the flame graphs and
// the tables. The views are in their own files (window.GpuMem): stacks.js (stacks and their
// labels), axis.js (a device's shared x axis), sections.js (the OOM incidents and the tables),
// allocations_view.js, segment_view.js, history_view.js, sites_view.js, tests_view.js.
//
// Invariant: text from the trace (function names, files, labels) reaches the page only through
// textContent or d3's .text(), never as HTML. Keys this app does not know yet are shown as generic
// tables (class "generic"), so a newer report model still renders.
(function () {
  "use strict";

  const doc = JSON.parse(document.getElementById("gpumem-data").textContent);
  const root = document.getElementById("report");
  const GM = window.GpuMem || {};
  // Keys with a view of their own; anything else is shown as it comes.
  const KNOWN_TOP = ["summary", "processes", "leaks", "held_at_exit", "peaks", "ooms", "failed_calls", "growth",
    "fragmentation", "spread", "what_if", "time_to_oom", "scopes", "top_sites", "stack_table", "allocation_timelines",
    "process_groups"];
  const KNOWN_PROCESS = ["file", "pid", "ppid", "exe", "cmdline", "host", "complete", "killed", "end", "exit_status",
    "signal", "truncated", "incomplete", "cut", "cut_at_ns", "events", "dropped_events", "duration_ns", "leaked_bytes",
    "warnings", "devices", "marks", "marks_total", "rank", "local_rank", "world_size", "pinned_host", "ended_in_oom",
    "story", "snapshot",
    "start_time_ns", "clock_start_ns"];  // the process's clocks, for gpumem-report merge: nothing to show
  const TABLE_ROWS = 100;  // rows drawn per table; the rest are counted

  GM.restoreStacks(doc);

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

  const bytes = GM.bytes, seconds = GM.seconds;
  const basename = (path) => String(path || "").split(/[\\/]/).pop();
  const isBytesKey = (key) => /bytes$|^requested$|^reserved$|^allocated$|^total$|^device_free$|free_in_reserved|largest_free_block|^size$/.test(key);

  // A table; `numeric` lists the columns whose cells are figures (right-aligned).
  function table(headers, rows, emptyText, numeric) {
    if (!rows.length) return h("p", { class: "muted" }, emptyText || "None.");
    const shown = rows.slice(0, TABLE_ROWS);
    const cls = (i) => (numeric && numeric.includes(i) ? "num" : null);
    return h("div", { class: "table-wrap" },
      h("table", {}, h("thead", {}, h("tr", {}, headers.map((t, i) => h("th", { class: cls(i) }, t)))),
        h("tbody", {}, shown.map((r) => h("tr", {}, r.map((c, i) => h("td", { class: cls(i) }, c)))))),
      rows.length > shown.length ? h("p", { class: "muted" }, `… and ${rows.length - shown.length} more`) : null);
  }

  const stackCell = (stack, label) => GM.stackCell(h, stack, label);
  // The stacks of one table's rows, each named by the line that tells it from the others.
  function stackCells(stacks) {
    const labels = GM.distinctLabels(stacks);
    return stacks.map((s, i) => stackCell(s, labels[i]));
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
  const ui = { h, bytes, seconds, table, section, stat, stackCell, stackCells, headline: GM.headline };

  // --- how a process ended ------------------------------------------------------------------------
  function ofProcess(list, p) {
    return (list || []).filter((x) => x.pid === p.pid && x.file === p.file);
  }
  // The run died of an out-of-memory error: the report says so (`ended_in_oom`), or, from a report
  // that does not, an OOM and an end that says the program failed (an exit status, a signal, a cut).
  function endedInOom(p) {
    if (p.ended_in_oom !== undefined) return Boolean(p.ended_in_oom);
    const failed = (p.exit_status !== null && p.exit_status !== undefined && p.exit_status !== 0) || p.end === "signal" || p.cut;
    return ofProcess(doc.ooms, p).length > 0 && Boolean(failed);
  }
  // The OOM the run died of (`ooms[].crash`), else its last.
  function crashOom(p) {
    const ooms = ofProcess(doc.ooms, p);
    return ooms.find((o) => o.crash) || ooms[ooms.length - 1] || null;
  }
  // What a crashed run held on a device when it crashed: its entries of leaks[] and held_at_exit[]
  // (the report marks them `live_when_crashed`; from a report that does not, the same lists).
  function liveAtCrash(p, device) {
    return ofProcess(doc.leaks, p).concat(ofProcess(doc.held_at_exit, p)).filter((x) => x.device === device)
      .reduce((a, x) => a + x.bytes, 0);
  }

  // What the memory still live at the end is called.
  function liveAtEndIs(p) {
    if (p.snapshot) return "Live when the snapshot was taken, not leaks";  // a moment of the run, not its end
    if (p.end === "signal") return "Live when killed, not leaks";
    if (p.cut) return "Live when the trace was cut, not leaks";
    if (endedInOom(p)) return "Live when it crashed, not leaks";
    return "Leaks";
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

  // --- timelines (uPlot) on the device's axis --------------------------------------------------------
  const stepped = uPlot.paths.stepped({ align: 1 });

  // Vertical markers (peak, OOMs, phases) drawn over the plot; labels only while they stay legible.
  function markersPlugin(markers, axis) {
    return {
      hooks: {
        draw: (u) => {
          const ctx = u.ctx, dpr = window.devicePixelRatio || 1;
          ctx.save();
          ctx.font = `${11 * dpr}px system-ui, sans-serif`;
          ctx.textAlign = "left";  // uPlot leaves the alignment of its last axis labels
          ctx.textBaseline = "alphabetic";
          const labelled = markers.length <= 24;
          let row = 0;  // peak and OOM labels stack downwards: they often share a moment
          for (const m of markers) {
            const x = Math.round(u.valToPos(axis.toX(m.t), "x", true));
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

  // A step chart of `series` ([{label, color, fill, values}]) over `times` (ns from t0) on the
  // device's axis; `legendValue(seriesIndex, dataIndex)` overrides a legend's figure.
  function stepChart(el, times, series, axis, markers, height, legendValue) {
    const sync = GM.uplotAxisOptions(axis);
    const data = () => [times.map((t) => axis.toX(t)), ...series.map((s) => s.values)];
    const opts = {
      width: Math.max(320, el.clientWidth || 900), height, plugins: [markersPlugin(markers, axis)],
      padding: [12, GM.PLOT_RIGHT, 0, 0],
      scales: sync.scales, cursor: sync.cursor, hooks: sync.hooks,
      series: [{ label: "at", value: (u, v) => (v === null ? "–" : axis.mode === "events" ? `${axis.format(v)} (${seconds(axis.toT(v))})` : seconds(v)) },
        ...series.map((s, i) => ({
          label: s.label, stroke: s.color, width: s.width || 1.5, fill: s.fill, paths: stepped,
          value: (u, v, si, di) => (di === null || di === undefined || v === null ? "–" : bytes(legendValue ? legendValue(i, di) : v)),
        }))],
      axes: [{ ...sync.xAxis }, { size: GM.PLOT_LEFT, gap: 4, values: (u, vals) => vals.map((v) => bytes(v)) }],
      legend: { live: true },
    };
    const plot = new uPlot(opts, data(), el);
    sync.attach(plot, data);
    new ResizeObserver(() => plot.setSize({ width: Math.max(320, el.clientWidth), height })).observe(el);
    (GM.charts || (GM.charts = [])).push({ device: axis.device, kind: "uplot", element: el, plot, axis,
      pageX: (t) => plot.over.getBoundingClientRect().left + plot.valToPos(axis.toX(t), "x") });
    return plot;
  }

  function timelineChart(el, samples, t0, markers, axis) {
    const order = (k) => (k === "reserved" ? 0 : k === "allocated" ? 1 : 2);
    // A level that never held memory (allocated bytes in a trace without block data) is not a line.
    const keys = Object.keys(samples[0]).filter((k) => k !== "time_ns" && typeof samples[0][k] === "number")
      .filter((k) => k === "reserved" || samples.some((s) => s[k] > 0))
      .sort((a, b) => order(a) - order(b));
    const palette = { reserved: "#3867d6", allocated: "#f0932b" };
    const extra = ["#20bf6b", "#8854d0", "#eb3b5a", "#0fb9b1", "#4b6584"];
    // Memory stays at a level until the next event changes it: steps, never slopes.
    return stepChart(el, samples.map((s) => s.time_ns - t0), keys.map((k, i) => {
      const color = palette[k] || extra[i % extra.length];
      return { label: k, color, fill: color + "1f", values: samples.map((s) => s[k]) };
    }), axis, markers, 260);
  }

  // Reserved memory by role (samples' "roles"), stacked: each series is the running total up to its
  // role, drawn from the top down so that each fill covers the one below; the legend shows each
  // role's own bytes.
  function rolesChart(el, samples, t0, markers, axis) {
    const withRoles = samples.filter((s) => s.roles);
    const names = Object.keys(withRoles[0].roles).filter((k) => withRoles.some((s) => s.roles[k] > 0));
    const own = names.map((k) => withRoles.map((s) => s.roles[k]));
    const cumulative = own.map((_, i) => withRoles.map((s, j) => own.slice(0, i + 1).reduce((a, r) => a + r[j], 0)));
    const order = names.map((_, i) => names.length - 1 - i);
    // Each role in its colour on every view of the page (the segment map, every allocation).
    const known = ((doc.allocation_timelines || [])[0] || {}).roles || [];
    const color = (i) => GM.ROLE_COLORS[(known.includes(names[i]) ? known.indexOf(names[i]) : i) % GM.ROLE_COLORS.length];
    // Opaque fills: each role's band covers the running totals above it, never blends with them.
    return stepChart(el, withRoles.map((s) => s.time_ns - t0), order.map((i) => ({
      label: names[i], color: color(i), fill: color(i), width: 1, values: cumulative[i],
    })), axis, markers, 220, (si, di) => own[order[si]][di]);
  }

  function timelineSamples(process, device) {
    if (Array.isArray(device.timeline) && device.timeline.length) return device.timeline;
    const frag = (doc.fragmentation || []).find((f) => f.pid === process.pid && f.file === process.file && f.device === device.device);
    return frag && frag.timeline && frag.timeline.length ? frag.timeline : null;
  }

  // --- flame graphs --------------------------------------------------------------------------------
  // A tree of stacks, root first: every node carries the bytes and count of the items below it. The
  // path of a stack is its flame path (stacks.js: no interpreter, profiler or start-up frames, runs
  // of pytest one node) unless `everyFrame`.
  function stackTree(items, rootName, everyFrame) {
    const root = { name: rootName, value: 0, count: 0, children: [], map: new Map() };
    for (const item of items) {
      if (!item.bytes) continue;
      let node = root;
      root.value += item.bytes;
      root.count += item.count || 0;
      const path = [...(item.prefix || []), ...GM.flamePath(item.stack, everyFrame)];
      if (!path.length) path.push({ name: "(no stack)" });
      for (const f of path) {
        const key = `${f.name || f.function}\u0000${f.file || f.where || f.module || ""}\u0000${f.line || ""}`;
        let child = node.map.get(key);
        if (!child) {
          child = { name: f.name || f.function || "??", frame: f, value: 0, count: 0, children: [], map: new Map() };
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
    if (!f || f.fold) return "#d6dbe0";
    if (f.kind) return { p: "#6a9fd8", u: "#f39c6b", l: "#f6c177", i: "#c8ced6" }[f.kind] || "#d6dbe0";
    if (f.lang === "python") return "#6a9fd8";
    if (/libgpumemtrace|libcudart|libcuda\.so|libcupti/.test(f.module || "")) return "#c8ced6";
    if (/^\[/.test(f.name || f.function || "")) return "#d6dbe0";
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

  // Tabs over one flame graph area: peak (reserved / allocated), leaks, growth, ... A view's items
  // may be a function, called each time its tab is shown (the moment chosen on the allocation
  // timeline changes what it holds); `refresh` redraws the tab shown.
  function flameTabs(views) {
    const itemsOf = (v) => (typeof v.items === "function" ? v.items() : v.items);
    const available = views.filter((v) => typeof v.items === "function" || v.items.some((i) => i.bytes > 0));
    if (!available.length) return h("p", { class: "muted" }, "No stacks hold memory at the peak, at exit or in growth.");
    const area = h("div", { class: "flame" });
    const buttons = available.map((v) => h("button", { type: "button" }, v.title));
    const every = h("input", { type: "checkbox", class: "every-frame" });
    let shown = 0;
    const show = (i) => {
      buttons.forEach((b, j) => b.classList.toggle("active", i === j));
      area.replaceChildren();
      area.appendChild(h("p", { class: "hint" }, available[i].caption));
      const graph = h("div", {});
      area.appendChild(graph);
      flameGraph(graph, stackTree(itemsOf(available[i]), available[i].root, every.checked), available[i].unit);
      shown = i;
    };
    buttons.forEach((b, i) => b.addEventListener("click", () => show(i)));
    every.addEventListener("change", () => show(shown));
    const wrap = h("div", {}, h("div", { class: "tabs" }, buttons),
      h("label", { class: "hint toggle" }, every, " every recorded frame (the interpreter's, pytest's and pluggy's, the profiler's own, start-up)"), area);
    wrap.refresh = (title) => { if (available[shown] && available[shown].title === title) show(shown); };
    requestAnimationFrame(() => show(0));
    return wrap;
  }

  // --- one process ---------------------------------------------------------------------------------
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

  // The device's x axis (axis.js): the event index by default where it has tensor blocks (as
  // memory_viz), else wall-clock time.
  function axisFor(p, d, t0) {
    const tl = timelineOf(p), detail = tl && tl.devices.find((x) => x.device === d.device);
    const end = tl ? tl.end : Math.max(0, p.duration_ns || 0);
    return GM.deviceAxis(d.device, detail ? detail.clock : null, end, detail && detail.blocks ? "events" : "time");
  }

  function axisToggle(axis) {
    if (!axis.hasEvents) return null;
    const buttons = [["events", "Event index"], ["time", "Wall clock"]].map(([mode, label]) => {
      const b = h("button", { type: "button", "data-axis": mode }, label);
      b.addEventListener("click", () => axis.setMode(mode));
      return b;
    });
    const mark = () => buttons.forEach((b) => b.classList.toggle("active", b.getAttribute("data-axis") === axis.mode));
    axis.on("mode", mark);
    mark();
    return h("div", { class: "axis-toggle" }, h("span", { class: "hint" }, "x axis:"), h("div", { class: "tabs" }, buttons),
      h("span", { class: "hint" }, "every chart of this GPU: one range (drag to zoom, double-click for all) and one cursor"));
  }

  function deviceBlock(p, d, peak, ooms, t0, axis) {
    const stats = h("div", { class: "stats" },
      stat("Peak reserved", bytes(d.peak_bytes), "accent"),
      d.peak_allocated_bytes ? stat("Peak allocated", bytes(d.peak_allocated_bytes)) : null,
      endedInOom(p) ? stat("Live when it crashed", bytes(liveAtCrash(p, d.device)))
        // A snapshot is a moment of the run: what was live then, never "at exit".
        : p.snapshot ? stat("Live at the snapshot", bytes(d.alive_at_exit_bytes))
        : stat("Leaked at exit", bytes(d.leaked_bytes), d.leaked_bytes ? "bad" : "good"),
      stat("OOMs / failed", String(ooms.length), ooms.length ? "bad" : "good"),
      d.total ? stat("Device memory", bytes(d.total)) : null,
      stat("Allocations", String(d.allocations + (d.block_allocations || 0))),
      d.after_cap ? stat("Live after the cap", `${bytes(d.after_cap.live_bytes)} (${bytes(d.after_cap.allocated_bytes)} in blocks)`, "warn") : null);
    const chartEl = h("div", { class: "timeline" });
    const block = h("div", { class: "device" },
      h("h3", {}, `GPU ${d.device}`, d.name ? h("span", { class: "muted" }, ` · ${d.name}`) : null), stats, axisToggle(axis), chartEl);
    const samples = timelineSamples(p, d);
    const markers = [];
    if (peak) markers.push({ t: peak.time_ns - t0, color: "#3867d6", kind: "peak", label: `peak ${bytes(peak.bytes)}` });
    if (peak && peak.allocated) markers.push({ t: peak.allocated.time_ns - t0, color: "#e17b12", kind: "peak", label: `allocated peak ${bytes(peak.allocated.bytes)}` });
    ooms.forEach((o, i) => markers.push({ t: o.time_ns - t0, color: "#d63031", kind: "oom", label: `OOM ${i + 1} (${o.verdict})` }));
    for (const s of ofProcess(doc.scopes, p)) {
      if (s.leaked_bytes) markers.push({ t: s.end_time_ns - t0, color: "#8854d0", kind: "scope", label: `${s.name} leaked ${bytes(s.leaked_bytes)}` });
    }
    for (const m of p.marks) markers.push({ t: m.time_ns - t0, color: "#7f8c8d", kind: "mark", label: m.label });
    if (samples) {
      const mainEl = h("div", {});
      chartEl.appendChild(mainEl);
      requestAnimationFrame(() => timelineChart(mainEl, samples, t0, markers, axis));
      if (samples.some((s) => s.roles)) {
        const rolesEl = h("div", { class: "timeline" });
        chartEl.appendChild(h("p", { class: "hint" }, "Reserved memory by role (docs/report.md, \"Memory by role\"), stacked:"));
        chartEl.appendChild(rolesEl);
        requestAnimationFrame(() => rolesChart(rolesEl, samples, t0, markers, axis));
      }
      chartEl.appendChild(h("p", { class: "hint" }, `${samples.length} samples, evenly thinned from the trace; lines mark the peak (blue), OOMs and failed allocations (red) and marks (grey).`));
    } else {
      chartEl.appendChild(h("p", { class: "muted" }, "No timeline for this device in the report (the analyzer keeps one for devices with caching-allocator blocks)."));
    }
    if (markers.some((m) => m.kind !== "mark")) {
      block.appendChild(h("ul", { class: "markers" }, markers.filter((m) => m.kind !== "mark").map((m) =>
        h("li", {}, h("span", { class: "dot", style: `background:${m.color}` }), `${m.label} at ${seconds(m.t)}`))));
    }
    if (peak) {
      const culprits = (peak.allocated && peak.allocated.culprits.length ? peak.allocated : peak);
      block.appendChild(h("h4", {}, `Live at the ${culprits === peak ? "" : "allocated "}peak: ${bytes(culprits.bytes)}`,
        culprits.phase ? h("span", { class: "muted" }, ` · in phase “${culprits.phase}”`) : null));
      const cells = stackCells(culprits.culprits.map((c) => c.stack));
      block.appendChild(table(["Bytes", "Share", "Count", "Stack"], culprits.culprits.map((c, i) =>
        [bytes(c.bytes), c.share !== undefined ? `${(100 * c.share).toFixed(1)}%` : "–", String(c.count), cells[i]])
        .concat(culprits.other_bytes ? [[bytes(culprits.other_bytes), "", "", "other stacks"]] : []), "", [0, 1, 2]));
      if (peak.advice) block.appendChild(h("p", { class: "advice" }, peak.advice));
    }
    return block;
  }

  function processSection(p) {
    const leaks = ofProcess(doc.leaks, p), peaks = ofProcess(doc.peaks, p), ooms = ofProcess(doc.ooms, p);
    const growth = ofProcess(doc.growth, p), tests = ofProcess(doc.scopes, p);
    const t0 = processT0(p, peaks, ooms);
    const multiDevice = p.devices.length > 1;
    const devicePrefix = (x) => (multiDevice ? [{ name: `GPU ${x.device}`, fold: true }] : []);
    const axes = new Map(p.devices.map((d) => [d.device, axisFor(p, d, t0)]));
    const el = h("section", { class: "process", id: `pid-${p.pid}` });
    el.appendChild(h("h2", {}, basename(p.exe) || basename(p.file),
      h("span", { class: "muted" }, p.snapshot ? " · PyTorch snapshot" : ` · pid ${p.pid}`)));
    const rank = p.rank === null || p.rank === undefined ? "" : `rank ${p.rank}` +
      (p.world_size !== null && p.world_size !== undefined ? ` of ${p.world_size}` : "") +
      (p.local_rank !== null && p.local_rank !== undefined ? ` (local rank ${p.local_rank})` : "");
    el.appendChild(h("p", { class: "meta" }, [rank, (p.cmdline || []).join(" "), p.host ? `on ${p.host}` : "",
      `${p.events} events over ${seconds(p.duration_ns)}`, endedAs(p), basename(p.file)].filter(Boolean).join(" · ")));
    const flags = [];
    if (p.cut) flags.push(`INCOMPLETE: cut at ${seconds(p.cut_at_ns)}: the analysis covers up to ${seconds(p.cut_at_ns)}; ` +
      "the leaks shown are what was live when the trace was cut, not leaks");
    if (p.truncated) flags.push("the trace is cut short");
    if (p.end === "signal") flags.push(`killed by ${p.signal}: what was live then is listed as live when killed, not leaks`);
    if (p.incomplete) flags.push(`${p.dropped_events} events were dropped: figures are incomplete`);
    for (const w of flags.concat(p.warnings || [])) el.appendChild(h("p", { class: "warning" }, w));

    // The sections of the report's story (`processes[].story`, docs/report.md "The story of a run"):
    // what went wrong (an OOM, real leaks, growth, tests that leaked) before the charts, in that order;
    // the rest after the flame graphs, in that order too.
    const crashed = endedInOom(p);
    const realLeaks = !crashed && !p.cut && p.end !== "signal" && !p.snapshot;
    const held = ofProcess(doc.held_at_exit, p), failed = ofProcess(doc.failed_calls, p), ttoom = ofProcess(doc.time_to_oom, p);
    const cards = {
      ooms: () => (ooms.length ? section(crashed ? "It ran out of memory" : `Out-of-memory errors and failed allocations (${ooms.length})`,
        GM.oomIncidents(ui, ooms, t0, { crash: crashed ? crashOom(p) : null, growth })) : null),
      leaks: () => section(`${liveAtEndIs(p)} (${leaks.filter((l) => !l.suppressed).length})`, GM.leaksTable(ui, leaks,
        leakingTests(p) ? `Nothing leaked at exit; ${leakingTests(p)} leaked during the run (see Tests).` : realLeaks ? "No leaks." : "Nothing was live.")),
      held_at_exit: () => (held.length ? section(`${p.snapshot ? "Live when the snapshot was taken" : crashed ? "Held when it crashed, not leaks"
        : "Held at exit, not leaks"} (${bytes(held.reduce((a, x) => a + x.bytes, 0))})`,
        GM.heldTable(ui, held)) : null),
      scopes: () => (tests.length && GM.testsView ? section(`Tests and scopes (${tests.length})`, GM.testsView(ui, tests, t0)) : null),
      growth: () => (growth.length ? section(`Growth (${growth.length})`, GM.growthTable(ui, growth)) : null),
      failed_calls: () => (failed.length ? section(`Failed calls, not out of memory (${failed.length})`, GM.failedCallsTable(ui, failed, t0)) : null),
      time_to_oom: () => (ttoom.length ? section("Time to OOM (an estimate, at the rate measured)", GM.timeToOomTable(ui, ttoom)) : null),
      what_if: () => ofProcess(doc.what_if, p).map((w) => section(`What if (GPU ${w.device}): PyTorch's allocator replayed`,
        GM.whatIfBlock(ui, w, t0, axes.get(w.device) || GM.deviceAxis(w.device, null, p.duration_ns, "time"), stepChart))),
    };
    const story = (Array.isArray(p.story) ? p.story : ["ooms", "leaks", "growth", "scopes", "held_at_exit", "peaks", "failed_calls",
      "time_to_oom", "what_if"]).filter((k) => cards[k]);
    for (const k of Object.keys(cards)) if (!story.includes(k)) story.push(k);
    const first = (k) => (k === "ooms" && ooms.length) || (k === "leaks" && realLeaks && leaks.length) || (k === "growth" && growth.length) ||
      (k === "scopes" && tests.some((x) => x.leaked_bytes));
    const place = (k) => [].concat(cards[k]() || []).forEach((c) => el.appendChild(c));
    story.filter(first).forEach(place);

    const moment = { t: null, level: "blocks", device: null, listeners: [] };  // the moment chosen on an allocation timeline
    for (const d of p.devices) {
      const peak = peaks.find((k) => k.device === d.device), axis = axes.get(d.device);
      el.appendChild(section(`Memory over time`, deviceBlock(p, d, peak, ooms.filter((o) => o.device === d.device), t0, axis)));
      const allocations = allocationsSection(p, d, ooms.filter((o) => o.device === d.device), t0, moment, axis);
      if (allocations) el.appendChild(allocations);
    }

    // Where a caching allocator reports its blocks, they (not its segments) say who holds memory.
    const views = [
      { title: "Allocated at peak", root: "allocated at the peak", caption: "Caching-allocator blocks live at the allocated peak, by stack (root at the top).",
        items: peaks.filter((k) => k.allocated).flatMap((k) => k.allocated.culprits.map((c) => ({ ...c, prefix: devicePrefix(k) }))
          .concat([{ bytes: k.allocated.other_bytes, count: 0, prefix: devicePrefix(k), stack: [{ name: "[other stacks]", fold: true }] }])) },
      { title: "Reserved at peak", root: "reserved at the peak", caption: "CUDA allocations live at each device's reserved peak, by stack (root at the top).",
        items: peaks.flatMap((k) => k.culprits.map((c) => ({ ...c, prefix: devicePrefix(k) }))
          .concat([{ bytes: k.other_bytes, count: 0, prefix: devicePrefix(k), stack: [{ name: "[other stacks]", fold: true }] }])) },
      { title: liveAtEndIs(p).replace(/, not leaks$/, ""), root: realLeaks ? "leaked" : "live at the end",
        caption: realLeaks ? "Memory still allocated when the trace ends (suppressed leaks left out), by stack." : "Memory still live when the run ended, by stack.",
        items: leaks.filter((l) => !l.suppressed).map((l) => ({ ...l, prefix: devicePrefix(l) })) },
      { title: "Growth", root: "growth", caption: "How much each growing call site rose from its first high-water mark to its highest.",
        items: growth.map((g) => ({ ...g, prefix: devicePrefix(g) })) },
    ];
    const flames = flameTabs(detailFlames(p, views, ooms, t0, moment, devicePrefix));
    moment.listeners.push(() => flames.refresh("At the chosen moment"));
    el.appendChild(section("Flame graphs", flames));

    story.filter((k) => !first(k)).forEach(place);
    const frag = ofProcess(doc.fragmentation, p);
    if (frag.length) el.appendChild(section("Fragmentation", GM.fragmentationTable(ui, frag, t0)));
    const sites = ofProcess(doc.top_sites, p);
    if (sites.length && GM.sitesView) el.appendChild(section("Top call sites", GM.sitesView(ui, sites)));
    if (p.pinned_host) el.appendChild(section("Pinned host memory", GM.pinnedHost(ui, p.pinned_host, t0)));
    if (p.marks.length) {
      el.appendChild(section(`Marks (${p.marks_total})`, h("details", {}, h("summary", {}, "Show the marks"),
        table(["At", "Label"], p.marks.map((m) => [seconds(m.time_ns - t0), m.label])))));
    }
    // Keys of newer report models: shown as they come.
    for (const [key, value] of Object.entries(p)) {
      if (!KNOWN_PROCESS.includes(key) && value !== null) el.appendChild(genericSection(key, genericTable(value)));
    }
    for (const [key, value] of Object.entries(doc)) {
      if (!KNOWN_TOP.includes(key) && Array.isArray(value)) {
        const mine = value.filter((x) => !x || x.pid === undefined || (x.pid === p.pid && (x.file === undefined || x.file === p.file)));
        if (mine.length) el.appendChild(genericSection(key, genericTable(mine)));
      }
    }
    return el;
  }

  function genericSection(key, body) {
    const s = section(key.replace(/_/g, " "), body);
    s.classList.add("generic");
    return s;
  }

  // --- the allocation timeline's views (allocations_view.js, segment_view.js) ------------------------
  function allocationsSection(p, d, ooms, t0, moment, axis) {
    const tl = timelineOf(p);
    const detail = tl && tl.devices.find((x) => x.device === d.device);
    if (!detail || !GM.allocationsView) return null;
    const view = GM.allocationsView(ui, {
      timeline: tl, device: detail, axis,
      marks: p.marks.map((m) => ({ time: m.time_ns - t0, label: m.label })),
      ooms: ooms.map((o) => ({ time: o.time_ns - t0, requested: o.requested, verdict: o.verdict, device_free: o.device_free,
        device_total: o.device_total, cap: o.cap })),
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
    if (!tl || !tl.devices.length || !GM.decodeLevel) return views;
    const decoded = new Map(), stacks = new Map();
    const levelOf = (dev, key) => {
      const id = `${dev.device}/${key}`;
      if (!decoded.has(id)) decoded.set(id, GM.decodeLevel(dev[key]));
      return decoded.get(id);
    };
    const stackOf = (i) => {
      if (!stacks.has(i)) stacks.set(i, GM.timelineStack(tl, i));
      return stacks.get(i);
    };
    const byStack = (dev, key, t) => {
      const L = levelOf(dev, key), sums = new Map();
      for (const i of GM.liveAt(L, t)) {
        const s = sums.get(L.stack[i]) || { bytes: 0, count: 0 };
        s.bytes += L.size[i]; s.count += 1;
        sums.set(L.stack[i], s);
      }
      return [...sums].map(([stack, s]) => ({ bytes: s.bytes, count: s.count, prefix: devicePrefix(dev), stack: stackOf(stack) }));
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
      dev[k].sites.map((s) => ({ bytes: what(s), count: s[2], prefix: devicePrefix(dev).concat(tl.devices.some((x) => x.blocks) ? [{ name: k === "blocks" ? "tensors" : "CUDA level", fold: true }] : []),
        stack: stackOf(s[0]) }))));
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

  // --- the spread across ranks (a directory of traces) ----------------------------------------------
  function spreadSection() {
    const peakMax = Math.max(1, ...doc.processes.map((p) => Math.max(0, ...p.devices.map((d) => d.peak_bytes))));
    const rows = doc.processes.map((p) => {
      const peak = Math.max(0, ...p.devices.map((d) => d.peak_bytes));
      return [h("a", { href: `#pid-${p.pid}` }, `pid ${p.pid}`), p.rank === null || p.rank === undefined ? "–" : String(p.rank),
        GM.breakable(h, basename(p.file)), p.host || "",
        h("div", { class: "bar-cell" }, h("div", { class: "bar", style: `width:${(100 * peak / peakMax).toFixed(1)}%` }), bytes(peak)),
        bytes(p.leaked_bytes), String(ofProcess(doc.ooms, p).length), String(p.events), endedInOom(p) ? "out of memory" : endedAs(p)];
    });
    const s = doc.spread || {};
    const line = (name, m) => (m ? h("p", {}, `${name}: min ${bytes(m.min)} (pid ${m.min_pid}), max ${bytes(m.max)} (pid ${m.max_pid}), mean ${bytes(Math.round(m.mean))}`) : null);
    const drawn = doc.process_groups ? ` (${doc.processes.length} drawn in full)` : "";
    return section(`Across ${doc.summary.processes} processes${drawn}`, line("Peak", s.peak_bytes), line("Leaked", s.leaked_bytes),
      table(["Process", "Rank", "Trace", "Host", "Peak", "Leaked", "OOMs", "Events", "Ended"], rows, "", [4, 5, 6, 7]));
  }

  // The cards at the top, in the order of the story: an OOM the run died of first, then the peak,
  // then what leaked (or was live when it crashed), the tests that leaked, growth.
  function summaryCards() {
    const s = doc.summary, crashed = doc.processes.filter(endedInOom);
    // What the crashed runs still held: the report's `live_when_crashed_bytes`, else (a report that
    // does not say) their leaks and what they held, device by device.
    const crashedBytes = s.live_when_crashed_bytes !== undefined ? s.live_when_crashed_bytes
      : crashed.reduce((a, p) => a + p.devices.reduce((b, d) => b + liveAtCrash(p, d.device), 0), 0);
    const cards = [];
    if (crashed.length) {
      const o = crashOom(crashed[0]);
      cards.push(stat(crashed.length > 1 ? `Ran out of memory (${crashed.length} processes)` : "Ran out of memory",
        o ? `${bytes(o.requested)} · ${o.verdict}` : "yes", "bad"));
    } else if (s.ooms) {
      cards.push(stat("OOMs / failed", String(s.ooms), "bad"));  // summed processes' too
    }
    cards.push(stat("Peak", bytes(s.peak_bytes), "accent"));
    const leaked = doc.processes.filter((p) => !endedInOom(p)).reduce((a, p) => a + p.leaked_bytes, 0);
    const snapshots = doc.processes.length && doc.processes.every((p) => p.snapshot);  // moments, not exits
    if (crashed.length) cards.push(stat("Live when it crashed", bytes(crashedBytes)));
    if (snapshots) cards.push(stat("Live at the snapshot", bytes(s.alive_at_exit_bytes)));
    else if (!crashed.length || leaked) cards.push(stat("Leaked at exit", leaked ? `${bytes(leaked)} in ${s.leaked_count}` : bytes(0), leaked ? "bad" : "good"));
    // A test's leak is freed by the end of the run, so it is not among the leaks at exit: its own card.
    if (s.scopes) {
      cards.push(stat("Tests that leaked", `${s.leaking_scopes} of ${s.scopes}` +
        (s.leaking_scopes ? ` · ${bytes((doc.scopes || []).reduce((a, x) => a + (x.leaked_bytes || 0), 0))}` : ""),
      s.leaking_scopes ? "bad" : "good"));
    }
    if (!s.ooms) cards.push(stat("OOMs / failed", "0", "good"));
    cards.push(stat("Growing sites", String(doc.growth.length), doc.growth.length ? "warn" : "good"));
    cards.push(stat(snapshots ? "Cached at the snapshot" : "Cached at exit", bytes(s.cached_bytes)));
    cards.push(stat("Trace", s.incomplete ? "incomplete" : s.complete ? "complete" : "cut short", s.incomplete || !s.complete ? "warn" : "good"));
    return h("div", { class: "stats top" }, cards);
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
    root.appendChild(summaryCards());
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
