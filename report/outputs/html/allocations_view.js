// report/outputs/html/allocations_view.js — "Every allocation": per device, each allocation the
// report kept as a band stacked over time (memory_viz's active memory timeline), the rest as
// aggregated bands per call site on top, the level's highest live bytes (and, over the tensors, the
// reserved bytes) as step lines; the peak, OOMs, marks, NVTX ranges and scopes marked. Hover a band
// for its size, times, role and stack; click to pin it and to show the segment map at that moment
// (segment_view.js); drag to zoom, double-click to zoom out. Its x axis is the device's (axis.js):
// the event index or wall-clock time, one range and one cursor with the device's other charts.
//
// Which allocations are bands was decided by gpumem-report (allocation_timeline.h): the page only
// lays them out. Each pixel column shows what was live at one moment of it (its middle; the column
// holding the peak or an OOM shows that moment), stacked in allocation order.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});
  GM.views = GM.views || [];

  // The plot's left and right margins: the same as the uPlot charts' (GM.PLOT_LEFT), so that one
  // moment is at one x on every chart of the device.
  const LEFT = GM.PLOT_LEFT, RIGHT = GM.PLOT_RIGHT, AXIS = 20, STRIP = 14, PLOT = 300;

  function niceStep(span, target) {
    const raw = span / target, power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
    return 10 * power;
  }

  GM.allocationsView = function (ui, opts) {
    const { h, bytes, seconds } = ui;
    const tl = opts.timeline, dev = opts.device, axis = opts.axis;
    const levels = [["blocks", "Tensors (caching-allocator blocks)"], ["memory", "CUDA allocations (driver level)"]]
      .filter(([key]) => dev[key]);
    const decoded = {};
    for (const [key] of levels) decoded[key] = GM.decodeLevel(dev[key]);
    const state = { key: levels[0][0], colorBy: "role", pinned: -1, selected: null, cols: null };

    const canvas = h("canvas", { class: "bands", role: "img", "aria-label": "allocations over time" });
    const tip = h("div", { class: "band-tip", hidden: true });
    const cursorLine = h("div", { class: "cursor-line", hidden: true });
    const wrap = h("div", { class: "canvas-wrap" }, canvas, cursorLine, tip);
    const lod = h("p", { class: "hint lod" });
    const pinned = h("div", { class: "pinned" });
    const tabs = levels.map(([key, label]) => h("button", { type: "button", "data-level": key }, label));
    const colorSelect = h("select", { "aria-label": "colour by" }, h("option", { value: "role" }, "role"), h("option", { value: "stack" }, "stack"));
    const reset = h("button", { type: "button", class: "reset" }, "Zoom out");
    const scaleBox = h("input", { type: "checkbox" });
    const segments = GM.segmentView ? GM.segmentView(ui, { timeline: tl, device: dev, decoded, ooms: opts.ooms }) : null;
    const history = GM.historyView && segments ? GM.historyView(ui, { timeline: tl, device: dev, decoded, segments, axis }) : null;
    const el = h("div", { class: "alloc-view", "data-device": String(dev.device) },
      h("div", { class: "controls" }, h("div", { class: "tabs" }, tabs), h("label", {}, "Colour by ", colorSelect),
        dev.blocks && dev.memory ? h("label", {}, scaleBox, " scale to reserved") : null, reset),
      wrap, lod, pinned, segments ? segments.element : null);
    if (history) segments.attach(history.element);

    const level = () => dev[state.key];
    const L = () => decoded[state.key];
    const peakTime = () => level().peak.time;

    function describeLod() {
      const lv = level(), n = lv.allocations;
      const pk = lv.peak;
      const exact = pk.shown_bytes === pk.bytes;
      let text = lv.aggregated === 0
        ? `All ${n.toLocaleString("en")} allocations are drawn individually.`
        : `${lv.shown.toLocaleString("en")} of ${n.toLocaleString("en")} allocations are drawn individually: ` +
          "everything live at the peak, at each OOM and at the end, and the largest of the rest. The other " +
          `${lv.aggregated.toLocaleString("en")} (${bytes(lv.aggregated_bytes)} allocated) are aggregated by call site: ` +
          `average bytes per ${seconds(lv.bucket_ns)}, drawn faded above the bands.`;
      text += exact ? ` At the peak (${bytes(pk.bytes)}, ${pk.count} allocations) every allocation is a band.`
        : ` At the peak, ${bytes(pk.shown_bytes)} of ${bytes(pk.bytes)} (${pk.shown_count} of ${pk.count} allocations) are bands; the rest gave way to the page's limit.`;
      text += " Each pixel column shows what was live at one moment of it: drag to zoom in on shorter allocations, double-click to zoom out" +
        (axis.mode === "events" ? "; the x axis counts the device's memory events (one step each), not time." : ".");
      lod.textContent = text;
    }

    // --- layout of one frame ---------------------------------------------------------------------
    function columnTimes(C) {
      const [x0, x1] = axis.range;
      const times = new Float64Array(C), span = (x1 - x0) / C;
      for (let c = 0; c < C; c++) times[c] = axis.toT(x0 + (c + 0.5) * span);
      const snap = (t) => {
        const c = Math.floor((axis.toX(t) - x0) / span);
        if (c >= 0 && c < C) times[c] = t;
      };
      for (const o of level().ooms) snap(o.time);
      snap(peakTime());
      if (state.selected !== null) snap(state.selected);
      return times;
    }

    // Runs of each band over columns at one height: [band, first column, end column, offset].
    function layout(C) {
      const D = L(), times = columnTimes(C);
      const runs = [], top = new Float64Array(C), open = new Int32Array(D.n).fill(-1), openOff = new Float64Array(D.n);
      const active = [];
      let next = 0;
      const close = (b, c) => {
        if (open[b] >= 0) runs.push([b, open[b], c, openOff[b]]);
        open[b] = -1;
      };
      for (let c = 0; c < C; c++) {
        const t = times[c];
        while (next < D.n && D.start[next] <= t) active.push(next++);
        let off = 0, k = 0;
        for (let j = 0; j < active.length; j++) {
          const b = active[j];
          if (!GM.isLiveAt(D, b, t)) { close(b, c); continue; }
          active[k++] = b;
          if (open[b] < 0) { open[b] = c; openOff[b] = off; } else if (openOff[b] !== off) { close(b, c); open[b] = c; openOff[b] = off; }
          off += D.size[b];
        }
        active.length = k;
        top[c] = off;
      }
      for (const b of active) close(b, C);
      const groups = level().groups;
      const agg = groups.map(() => new Float64Array(C));
      const aggTop = new Float64Array(C);
      for (let c = 0; c < C; c++) {
        const values = GM.aggregateAt(level(), times[c]);
        let sum = 0;
        values.forEach((v, g) => { agg[g][c] = v; sum += v; });
        aggTop[c] = top[c] + sum;
      }
      return { C, times, runs, top, agg, aggTop };
    }

    function envelope(lv) {
      // [time, bytes] steps of a level's highest live bytes per bucket, inside the view.
      const out = [];
      const [t0, t1] = axis.range.map(axis.toT);
      for (let i = 0; i < lv.live_max.length; i++) {
        const t = lv.origin + i * lv.bucket_ns;
        if (t + lv.bucket_ns < t0 || t > t1) continue;
        out.push([Math.max(t, t0), lv.live_max[i]]);
      }
      return out;
    }

    // [time, bytes] steps, one per column: `value(c)` from each column's left edge.
    function columnLine(lay, value) {
      const [x0, x1] = axis.range, span = (x1 - x0) / lay.C;
      const out = [];
      for (let c = 0; c < lay.C; c++) out.push([axis.toT(x0 + c * span), value(c)]);
      return out;
    }

    // The bytes live at each of `times` (increasing) at one level: its bands and its aggregate.
    function liveSums(D, lv, times) {
      const edges = [];
      for (let i = 0; i < D.n; i++) {
        edges.push([D.start[i], D.size[i]]);
        if (!GM.liveAtEnd(D, i)) edges.push([D.end[i], -D.size[i]]);
      }
      edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      const sums = new Float64Array(times.length);
      let k = 0, live = 0;
      for (let c = 0; c < times.length; c++) {
        while (k < edges.length && (edges[k][0] < times[c] || (edges[k][0] === times[c] && edges[k][1] > 0))) live += edges[k++][1];
        sums[c] = live + GM.aggregateAt(lv, times[c]).reduce((a, v) => a + v, 0);
      }
      return (c) => sums[c];
    }

    // --- drawing ---------------------------------------------------------------------------------
    function geometry() {
      const strips = (tl.nvtx.length ? 1 : 0) + ((opts.scopes || []).length ? 1 : 0);
      const top = 6 + strips * (STRIP + 2);
      return { strips, top, height: top + PLOT + AXIS };
    }

    function draw() {
      const width = Math.max(360, wrap.clientWidth || 900);
      const g = geometry(), dpr = window.devicePixelRatio || 1;
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(g.height * dpr);
      canvas.style.width = `${width}px`;
      canvas.style.height = `${g.height}px`;
      const ctx = canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, width, g.height);
      const plotW = width - LEFT - RIGHT, C = Math.max(1, Math.min(2400, Math.floor(plotW)));
      const lay = layout(C);
      state.cols = lay;
      // On the event axis a time bucket spans many columns: the lines are then what was live at each
      // column's moment (its bands and aggregate), not a bucket's highest.
      const byColumn = axis.mode === "events";
      const envs = [[byColumn ? columnLine(lay, (c) => lay.aggTop[c]) : envelope(level()), state.key === "blocks" ? "#e17b12" : "#3867d6"]];
      if (state.key === "blocks" && dev.memory) {
        envs.push([byColumn ? columnLine(lay, liveSums(decoded.memory, dev.memory, lay.times)) : envelope(dev.memory), "#3867d6"]);
      }
      // The scale fits this level; the reserved line over the tensors is drawn where it fits (its
      // highest value is named when it does not), unless "scale to reserved" is on.
      let yMax = 1;
      for (let c = 0; c < C; c++) yMax = Math.max(yMax, lay.aggTop[c]);
      envs.forEach(([env], i) => { if (i === 0 || scaleBox.checked) for (const [, v] of env) yMax = Math.max(yMax, v); });
      yMax *= 1.06;
      const offScale = envs.slice(1).reduce((a, [env]) => Math.max(a, ...env.map(([, v]) => v)), 0);
      const [x0, x1] = axis.range;
      const x = (t) => LEFT + ((axis.toX(t) - x0) / (x1 - x0)) * plotW;
      const colX = (c) => LEFT + (c * plotW) / C;
      const y = (b) => g.top + PLOT - (b / yMax) * PLOT;
      state.geom = { width, plotW, C, yMax, top: g.top, x, colX, y };

      // grid and axes
      ctx.font = "11px system-ui, sans-serif";
      ctx.fillStyle = "#6b7785";
      ctx.strokeStyle = "#eef1f5";
      ctx.lineWidth = 1;
      const yStep = niceStep(yMax, 5);
      for (let v = 0; v <= yMax; v += yStep) {
        ctx.beginPath(); ctx.moveTo(LEFT, Math.round(y(v)) + 0.5); ctx.lineTo(LEFT + plotW, Math.round(y(v)) + 0.5); ctx.stroke();
        ctx.fillText(bytes(Math.round(v)), 4, y(v) + 4);
      }
      for (const v of axis.ticks(x0, x1, Math.max(2, Math.floor(plotW / 110)))) {
        const label = axis.format(v), px = LEFT + ((v - x0) / (x1 - x0)) * plotW;
        ctx.fillText(label, px - ctx.measureText(label).width / 2, g.top + PLOT + 14);
      }

      // bands, then the aggregate above them
      const D = L(), lv = level();
      for (const [b, c0, c1, off] of lay.runs) {
        ctx.fillStyle = state.colorBy === "role" ? GM.ROLE_COLORS[D.role[b]] : GM.stackColor(D.stack[b]);
        const yTop = y(off + D.size[b]), yBottom = y(off);
        ctx.fillRect(colX(c0), yTop, colX(c1) - colX(c0), Math.max(0.5, yBottom - yTop));
      }
      ctx.globalAlpha = 0.45;
      for (let c = 0; c < C; c++) {
        let base = lay.top[c];
        lv.groups.forEach((grp, gi) => {
          const v = lay.agg[gi][c];
          if (!v) return;
          ctx.fillStyle = state.colorBy === "role" ? GM.ROLE_COLORS[grp.role] : GM.stackColor(grp.stack);
          ctx.fillRect(colX(c), y(base + v), colX(c + 1) - colX(c), y(base) - y(base + v));
          base += v;
        });
      }
      ctx.globalAlpha = 1;
      if (state.pinned >= 0) {
        ctx.strokeStyle = "#111"; ctx.lineWidth = 2;
        for (const [b, c0, c1, off] of lay.runs) {
          if (b === state.pinned) ctx.strokeRect(colX(c0), y(off + D.size[b]), colX(c1) - colX(c0), y(off) - y(off + D.size[b]));
        }
      }

      // the highest live bytes per bucket (steps), reserved over the tensors
      ctx.save();
      ctx.beginPath(); ctx.rect(LEFT, g.top - 1, plotW, PLOT + 2); ctx.clip();
      ctx.lineWidth = 1.5;
      for (const [env, color] of envs) {
        ctx.strokeStyle = color;
        ctx.beginPath();
        let lastY = 0;
        env.forEach(([t, v], i) => {
          const px = x(t), py = y(v);
          if (i === 0) ctx.moveTo(px, py); else { ctx.lineTo(px, lastY); ctx.lineTo(px, py); }
          lastY = py;
        });
        if (env.length) ctx.lineTo(Math.min(LEFT + plotW, x(tl.end)), lastY);
        ctx.stroke();
      }
      ctx.restore();

      if (offScale > yMax) {
        ctx.fillStyle = "#3867d6";
        const note = `reserved up to ${bytes(offScale)}: above the scale`;
        ctx.fillText(note, LEFT + plotW - ctx.measureText(note).width - 4, g.top + 38);
      }

      // markers: marks (dashed), the peak (blue), OOMs (red), the selected moment (black)
      const vline = (t, color, dash, label, row) => {
        const px0 = x(t);
        if (px0 < LEFT - 0.5 || px0 > LEFT + plotW + 0.5) return;
        const px = Math.round(x(t)) + 0.5;
        ctx.strokeStyle = color; ctx.lineWidth = dash ? 1 : 2; ctx.setLineDash(dash ? [4, 3] : []);
        ctx.beginPath(); ctx.moveTo(px, g.top); ctx.lineTo(px, g.top + PLOT); ctx.stroke();
        ctx.setLineDash([]);
        if (label) {
          ctx.fillStyle = color;
          const w = ctx.measureText(label).width;
          ctx.fillText(label, px + 4 + w > LEFT + plotW ? px - 4 - w : px + 4, g.top + 12 + 13 * row);
        }
      };
      // Marks only while they stay apart (a mark per step would hide the bands).
      const marks = (opts.marks || []).filter((m) => x(m.time) >= LEFT && x(m.time) <= LEFT + plotW);
      if (marks.length <= 60) marks.forEach((m) => vline(m.time, "#95a0ab", true, marks.length <= 12 ? m.label : "", 3));
      vline(peakTime(), "#3867d6", false, `peak ${bytes(lv.peak.bytes)}`, 0);
      // Each failed attempt is a line; each OOM incident (its last attempt) is named.
      lv.ooms.forEach((o) => vline(o.time, "#d63031", false, "", 1));
      (opts.ooms || []).forEach((o, i) => vline(o.time, "#d63031", false, `OOM ${i + 1}`, 1));
      if (state.selected !== null) vline(state.selected, "#111", false, "", 2);

      // strips: NVTX ranges, then scopes (tests)
      let stripY = 6;
      const strip = (items, color) => {
        for (const it of items) {
          const a = Math.max(LEFT, x(it.begin)), b = Math.min(LEFT + plotW, x(it.end));
          if (b < LEFT || a > LEFT + plotW) continue;
          ctx.fillStyle = color(it);
          ctx.fillRect(a, stripY, Math.max(1, b - a), STRIP);
          if (b - a > 40) {
            ctx.save(); ctx.beginPath(); ctx.rect(a, stripY, b - a, STRIP); ctx.clip();
            ctx.fillStyle = "#fff"; ctx.fillText(it.name, a + 3, stripY + 11); ctx.restore();
          }
        }
        stripY += STRIP + 2;
      };
      state.strips = [];
      if (tl.nvtx.length) {
        const items = tl.nvtx.map(([name, tid, begin, end]) => ({ name, begin, end, tid }));
        state.strips.push([stripY, items, "NVTX range"]);
        strip(items, (it) => GM.stackColor(it.name.length * 7 + it.name.charCodeAt(0)));
      }
      if ((opts.scopes || []).length) {
        state.strips.push([stripY, opts.scopes, "scope"]);
        strip(opts.scopes, (it) => (it.leaked ? "#d63031" : "#20bf6b"));
      }
      canvas.setAttribute("data-drawn", String(lay.runs.length));
      placeCursor();
    }

    // The device's cursor (a moment hovered on any of its charts) as a line over the plot.
    function placeCursor() {
      const G = state.geom;
      if (!G || axis.cursor === null) { cursorLine.hidden = true; return; }
      const px = G.x(axis.cursor);
      cursorLine.hidden = px < LEFT || px > LEFT + G.plotW;
      cursorLine.style.left = `${Math.round(px)}px`;
      cursorLine.style.top = `${G.top}px`;
      cursorLine.style.height = `${PLOT}px`;
    }
    const timeAt = (px) => {
      const G = state.geom, [x0, x1] = axis.range;
      return axis.toT(x0 + ((Math.min(Math.max(px, LEFT), LEFT + G.plotW) - LEFT) / G.plotW) * (x1 - x0));
    };

    // --- what is under the pointer ------------------------------------------------------------------
    function hit(px, py) {
      const G = state.geom, lay = state.cols;
      if (!G || !lay) return null;
      for (const [sy, items, what] of state.strips || []) {
        if (py >= sy && py < sy + STRIP) {
          const t = timeAt(px);
          const it = items.find((s) => s.begin <= t && t <= s.end);
          return it ? { strip: it, what } : null;
        }
      }
      const c = Math.floor(((px - LEFT) / G.plotW) * G.C);
      if (c < 0 || c >= G.C || py < G.top || py > G.top + PLOT) return null;
      const t = lay.times[c], b = ((G.top + PLOT - py) / PLOT) * G.yMax;
      const D = L();
      let off = 0;
      for (const i of GM.liveAt(D, t)) {
        if (b >= off && b < off + D.size[i]) return { band: i, t };
        off += D.size[i];
      }
      const values = GM.aggregateAt(level(), t);
      for (let gi = 0; gi < values.length; gi++) {
        if (b >= off && b < off + values[gi]) return { group: gi, t, value: values[gi] };
        off += values[gi];
      }
      return { t };
    }

    function bandDetails(i, withFrames) {
      const D = L();
      const life = GM.liveAtEnd(D, i) ? `allocated at ${seconds(D.start[i])}, still live at the end`
        : `allocated at ${seconds(D.start[i])}, freed at ${seconds(D.end[i])} (lived ${seconds(D.end[i] - D.start[i])})`;
      const why = GM.WHY.filter(([bit]) => D.flags[i] & bit).map(([, text]) => text).join(", ");
      const kind = state.key === "blocks" ? "tensor block" : GM.isPhysical(D, i) ? "physical memory (cuMemCreate)" : GM.isSegment(D, i) ? "allocator segment" : "CUDA allocation";
      const lines = GM.stackLines(tl, D.stack[i]);
      const body = [h("div", { class: "tip-head" }, h("b", {}, bytes(D.size[i])), ` · ${GM.roleName(tl, D.role[i])} · ${kind}`),
        h("div", {}, life),
        h("div", { class: "muted" }, (D.addr[i] >= 0 ? `at 0x${D.addr[i].toString(16)} · ` : "") + `drawn: ${why}`),
        h("ol", { class: "tip-stack" }, lines.map((line) => h("li", {}, line)))];
      if (withFrames) {
        body.push(h("details", { class: "frames" }, h("summary", {}, "every frame"),
          h("ol", {}, GM.stackFrames(tl, D.stack[i]).map((f) => h("li", { class: f.kind === "p" ? "py" : f.kind === "i" ? "internal" : "" },
            h("span", { class: "fn" }, f.function), f.where ? h("span", { class: "where" }, ` ${f.where}`) : null)))));
      }
      return body;
    }

    function groupDetails(gi, t, value) {
      const grp = level().groups[gi];
      const lines = grp.stack < 0 ? ["(other call sites)"] : GM.stackLines(tl, grp.stack);
      return [h("div", { class: "tip-head" }, h("b", {}, `${bytes(value)} on average`), ` · aggregated · ${GM.roleName(tl, grp.role)}`),
        h("div", {}, `${grp.count.toLocaleString("en")} allocations (${bytes(grp.bytes)}) of this ${grp.stack < 0 ? "group" : "call site"} were not drawn one by one; ` +
          `this is their average over ${seconds(level().bucket_ns)} around ${seconds(t)}`),
        h("ol", { class: "tip-stack" }, lines.map((line) => h("li", {}, line)))];
    }

    function showTip(px, py, content) {
      tip.replaceChildren(...content);
      tip.hidden = false;
      const maxLeft = (wrap.clientWidth || 900) - 380;
      tip.style.left = `${Math.max(0, Math.min(px + 14, maxLeft))}px`;
      tip.style.top = `${py + 14}px`;
    }

    const pointer = (ev) => {
      const r = canvas.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    };
    let dragFrom = null;
    canvas.addEventListener("mousemove", (ev) => {
      const [px, py] = pointer(ev);
      if (state.geom && px >= LEFT && px <= LEFT + state.geom.plotW) axis.setCursor(timeAt(px), view);
      const at = hit(px, py);
      if (!at) { tip.hidden = true; return; }
      if (at.band !== undefined) showTip(px, py, bandDetails(at.band, false));
      else if (at.group !== undefined) showTip(px, py, groupDetails(at.group, at.t, at.value));
      else if (at.strip) showTip(px, py, [h("div", {}, `${at.what}: ${at.strip.name}`), h("div", { class: "muted" }, `${seconds(at.strip.begin)} – ${seconds(at.strip.end)}`)]);
      else tip.hidden = true;
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; axis.setCursor(null, view); });
    canvas.addEventListener("mousedown", (ev) => { dragFrom = pointer(ev)[0]; });
    canvas.addEventListener("mouseup", (ev) => {
      const [px, py] = pointer(ev);
      const G = state.geom, from = dragFrom;
      dragFrom = null;
      if (!G || from === null) return;
      if (Math.abs(px - from) > 5) {  // a drag: zoom every chart of the device to it
        const a = axis.toX(timeAt(Math.min(px, from))), b = axis.toX(timeAt(Math.max(px, from)));
        if (b - a > (axis.mode === "events" ? 0.5 : 1)) axis.setRange(a, b, null);
        return;
      }
      const at = hit(px, py);
      if (!at || at.t === undefined) return;
      select(at.t, at.band !== undefined ? at.band : -1, null);
    });
    canvas.addEventListener("dblclick", () => axis.reset(null));
    reset.addEventListener("click", () => axis.reset(null));
    axis.on("range", () => { describeLod(); draw(); });
    axis.on("cursor", (source) => { if (source !== view) placeCursor(); });
    colorSelect.addEventListener("change", () => { state.colorBy = colorSelect.value; draw(); });
    scaleBox.addEventListener("change", draw);
    tabs.forEach((b) => b.addEventListener("click", () => {
      state.key = b.getAttribute("data-level");
      state.pinned = -1;
      pinned.replaceChildren();
      tabs.forEach((x) => x.classList.toggle("active", x === b));
      describeLod();
      draw();
    }));

    // A moment chosen (a click, the peak, an OOM): the segment map and the "live at" flame graph follow.
    function select(t, band, label) {
      state.selected = t;
      state.pinned = band;
      pinned.replaceChildren();
      if (band >= 0) pinned.appendChild(h("div", { class: "pinned-band" }, h("div", { class: "hint" }, "Pinned (click elsewhere to change):"), ...bandDetails(band, true)));
      draw();
      if (segments) segments.show(t, label, band >= 0 && state.key === "blocks" ? L().addr[band] : null);
      if (opts.onSelect) opts.onSelect(t, state.key);
    }

    // Roles say something only for PyTorch's blocks; otherwise each call site gets its colour.
    const roled = Object.values(decoded).some((D) => D && D.role.some((r) => r !== 7));
    state.colorBy = roled ? "role" : "stack";
    colorSelect.value = state.colorBy;
    tabs[0].classList.add("active");
    describeLod();
    const view = {
      element: el,
      draw,
      select,
      // For tests and scripts: where band `i` of the shown level is drawn (page coordinates of the
      // middle of its widest run), or null when no column shows it.
      locateBand(i) {
        const lay = state.cols, G = state.geom;
        if (!lay || !G) return null;
        let best = null;
        for (const [b, c0, c1, off] of lay.runs) if (b === i && (!best || c1 - c0 > best[1] - best[0])) best = [c0, c1, off];
        if (!best) return null;
        const r = canvas.getBoundingClientRect();
        return { x: r.left + (G.colX(best[0]) + G.colX(best[1])) / 2, y: r.top + (G.y(best[2]) + G.y(best[2] + L().size[i])) / 2 };
      },
      timeToPage(t) {
        const G = state.geom, r = canvas.getBoundingClientRect();
        return G ? { x: r.left + G.x(t), y: r.top + G.top + PLOT - 4 } : null;
      },
      axis,
      device: dev.device,
      history,
      segments,
      level: () => state.key,
      setLevel(key) { const b = tabs.find((x) => x.getAttribute("data-level") === key); if (b) b.click(); },
      decoded,
    };
    GM.views.push(view);
    (GM.charts || (GM.charts = [])).push({ device: dev.device, kind: "allocations", element: canvas,
      pageX: (t) => (state.geom ? canvas.getBoundingClientRect().left + state.geom.x(t) : null), axis });
    if (segments) segments.onJump = (t, label) => select(t, -1, label);
    requestAnimationFrame(() => {
      draw();
      if (segments) segments.showDefault();
    });
    if (typeof ResizeObserver !== "undefined") {
      let width = 0;
      new ResizeObserver(() => { if (wrap.clientWidth !== width) { width = wrap.clientWidth; draw(); } }).observe(wrap);
    }
    return view;
  };
})();
