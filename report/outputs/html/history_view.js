// report/outputs/html/history_view.js — the allocator state history, as memory_viz's "Allocator
// State History": every allocation and free of the device (tensor blocks and the CUDA allocations
// or segments that hold them) in order, a list to step through; after each event the segment map
// (segment_view.js) shows the allocator's state then, the block the event touched outlined.
//
// Built from the bands (allocation_timeline.h): exact when every allocation of the run is a band;
// otherwise the allocations gpumem-report aggregated are not in it, and the page says so. Events at
// one moment keep the trace's order where it is known: a segment before the blocks carved from it,
// blocks freed before their segment.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  const WINDOW = 14;  // list rows drawn around the chosen event

  GM.historyView = function (ui, opts) {
    const { h, bytes, seconds } = ui;
    const tl = opts.timeline, segments = opts.segments, axis = opts.axis;
    const B = opts.decoded.blocks || null, M = opts.decoded.memory || null;
    const levels = [M, B].filter(Boolean);

    // The events: [time, order at that time, level, band, +1 allocated / -1 freed].
    const events = [];
    for (const L of levels) {
      const blocks = L === B;
      for (let i = 0; i < L.n; i++) {
        events.push([L.start[i], blocks ? 1 : 0, L, i, 1]);
        if (!GM.liveAtEnd(L, i)) events.push([L.end[i], blocks ? 2 : 3, L, i, -1]);
      }
    }
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[3] - b[3]);
    const index = new Map(levels.map((L) => [L, { start: new Float64Array(L.n).fill(Infinity), end: new Float64Array(L.n).fill(Infinity) }]));
    events.forEach(([, , L, i, sign], k) => { index.get(L)[sign > 0 ? "start" : "end"][i] = k; });

    const status = h("span", { class: "history-status" });
    const prev = h("button", { type: "button", "aria-label": "previous event" }, "◀");
    const next = h("button", { type: "button", "aria-label": "next event" }, "▶");
    const slider = h("input", { type: "range", min: "0", max: String(Math.max(0, events.length - 1)), value: "0", "aria-label": "event" });
    const list = h("ol", { class: "history-list", tabindex: "0" });
    const element = h("div", { class: "history-view" },
      h("h4", {}, "Allocator state history"),
      h("p", { class: "hint" }, `${events.length.toLocaleString("en")} events: every allocation and free of a tensor block or of a CUDA allocation (a segment). ` +
        "Step with ◀ ▶, the slider or the arrow keys, or click an event: the segment map above shows the state after it."),
      h("div", { class: "history-controls" }, prev, next, slider, status), list);
    const view = { element, events, current: -1, select };
    if (!events.length) {
      element.replaceChildren(h("h4", {}, "Allocator state history"), h("p", { class: "muted" }, "No allocation to step through."));
      return view;
    }

    const describe = ([t, , L, i, sign]) => {
      const kind = L === B ? "block" : GM.isPhysical(M, i) ? "physical memory" : GM.isSegment(M, i) ? "segment" : "CUDA allocation";
      return [`${sign > 0 ? "+" : "−"}${bytes(L.size[i])} ${kind}`, GM.headline(GM.timelineStack(tl, L.stack[i])), seconds(t)];
    };

    function drawList(k) {
      const first = Math.max(0, Math.min(Math.max(0, k) - (WINDOW >> 1), events.length - WINDOW));
      const rows = [];
      for (let j = first; j < Math.min(events.length, first + WINDOW); j++) {
        const [what, where, when] = describe(events[j]);
        const row = h("li", { class: `${j === k ? "current " : ""}${events[j][4] > 0 ? "alloc" : "free"}`, "data-event": String(j) },
          h("span", { class: "n" }, `#${j.toLocaleString("en")}`), h("span", { class: "what" }, what),
          h("span", { class: "where" }, GM.breakable(h, where)), h("span", { class: "when" }, when));
        row.addEventListener("click", () => select(j));
        rows.push(row);
      }
      list.replaceChildren(...rows);
    }

    function select(k) {
      k = Math.max(0, Math.min(events.length - 1, k));
      view.current = k;
      const [t, , L, i] = events[k];
      const live = (D, b) => { const at = index.get(D); return at !== undefined && at.start[b] <= k && k < at.end[b]; };
      segments.show(t, `after event #${k.toLocaleString("en")} of ${events.length.toLocaleString("en")}`,
        L === B && B.addr[i] >= 0 ? B.addr[i] : null, live);
      slider.value = String(k);
      status.textContent = `event #${k.toLocaleString("en")} of ${events.length.toLocaleString("en")}: ${describe(events[k]).slice(0, 2).join(" · ")}`;
      drawList(k);
      if (axis) axis.setCursor(t, view);
    }

    prev.addEventListener("click", () => select(view.current - 1));
    next.addEventListener("click", () => select(view.current + 1));
    slider.addEventListener("input", () => select(Number(slider.value)));
    list.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowDown" || ev.key === "ArrowRight") { select(view.current + 1); ev.preventDefault(); }
      if (ev.key === "ArrowUp" || ev.key === "ArrowLeft") { select(view.current - 1); ev.preventDefault(); }
    });
    drawList(-1);
    status.textContent = "Choose an event to see the allocator's state after it.";
    return view;
  };
})();
