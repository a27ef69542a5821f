// report/outputs/html/segment_view.js — the segment map at one moment, as memory_viz's segment view:
// every segment the caching allocator held then (a CUDA allocation with blocks inside, or the
// mapped chunks of an expandable segment, adjacent ones joined), its blocks, its free gaps, and the
// largest free block of all outlined. An OOM that fragmentation caused shows as a request larger
// than the largest white gap while much is white.
//
// Built from the bands (allocation_timeline.h): exact wherever every allocation live then is a band
// (at the peak and each OOM gpumem-report keeps them all, within its limits); elsewhere the page
// says how much of the moment's memory was aggregated and is not placed. A legend names the colours;
// at an OOM the line of figures names what refused the request (the allocator's cap, the device's
// capacity, fragmentation). The allocator state history (history_view.js) shows it after any event.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  const ROW = 18, GAP = 5, MIN_WIDTH = 3;

  GM.segmentView = function (ui, opts) {
    const { h, bytes, seconds, table } = ui;
    const tl = opts.timeline, dev = opts.device, decoded = opts.decoded;
    const title = h("h4", {}, "Segments");
    const buttons = h("div", { class: "tabs moments" });
    const summary = h("p", { class: "segment-summary" });
    const note = h("p", { class: "hint" });
    const canvas = h("canvas", { class: "segments", role: "img", "aria-label": "segment map" });
    const tip = h("div", { class: "band-tip", hidden: true });
    const wrap = h("div", { class: "canvas-wrap" }, canvas, tip);
    const tableEl = h("div", { class: "segment-table" });
    const tableTitle = h("summary", {});
    const tableBox = h("details", { class: "segments-table" }, tableTitle, tableEl);
    const legend = h("ul", { class: "legend" });
    const element = h("div", { class: "segment-view" }, title, buttons, summary, note, wrap, legend, tableBox);
    // `history`: the allocator state history's element, placed between the map and its table.
    const view = { element, onJump: null, show, current: null, attach: (history) => element.insertBefore(history, tableBox) };
    // At first: the first OOM, else the peak.
    view.showDefault = () => show(moments[moments.length > 1 ? 1 : 0][1], moments[moments.length > 1 ? 1 : 0][0], null);

    const blockLevel = dev.blocks, memoryLevel = dev.memory;
    const B = decoded.blocks || null, M = decoded.memory || null;
    const incidents = opts.ooms || [];

    // Moments worth a button: the peak of the tensors (else of the CUDA level) and each OOM incident.
    const main = blockLevel || memoryLevel;
    const moments = [["the peak", main.peak.time]].concat(incidents.map((o, i) => [`OOM ${i + 1}`, o.time]));
    for (const [label, t] of moments) {
      const b = h("button", { type: "button" }, label);
      b.addEventListener("click", () => (view.onJump ? view.onJump(t, label) : show(t, label, null)));
      buttons.appendChild(b);
    }

    // The segments live at `t` (or those `live` says: (level decoded, band) -> bool, the history's
    // state after one event), by address, each with its blocks and gaps.
    function mapAt(t, live) {
      const liveOf = (L) => (live ? Array.from({ length: L.n }, (_, i) => i).filter((i) => live(L, i)) : GM.liveAt(L, t));
      const segs = [];
      const blocks = B ? liveOf(B).filter((i) => B.addr[i] >= 0).sort((a, b) => B.addr[a] - B.addr[b]) : [];
      if (M) {
        const held = liveOf(M).filter((i) => M.addr[i] >= 0).sort((a, b) => M.addr[a] - M.addr[b]);
        for (const i of held) {
          const last = segs[segs.length - 1];
          // The chunks of one expandable segment are mapped end to end: one segment.
          if (last && GM.isPhysical(M, i) && last.physical && last.addr + last.size === M.addr[i]) {
            last.size += M.size[i];
            last.bands.push(i);
            continue;
          }
          segs.push({ addr: M.addr[i], size: M.size[i], bands: [i], physical: GM.isPhysical(M, i), segment: GM.isSegment(M, i), blocks: [] });
        }
      }
      let outside = 0, outsideBytes = 0, bi = 0;
      for (const s of segs) {
        while (bi < blocks.length && B.addr[blocks[bi]] < s.addr) { outside++; outsideBytes += B.size[blocks[bi]]; bi++; }
        while (bi < blocks.length && B.addr[blocks[bi]] < s.addr + s.size) s.blocks.push(blocks[bi++]);
      }
      for (; bi < blocks.length; bi++) { outside++; outsideBytes += B.size[blocks[bi]]; }
      // With block data, the allocator's segments are those with blocks (or that PyTorch named); other
      // CUDA allocations (a library's workspace, the program's own) are counted apart.
      const shown = B ? segs.filter((s) => s.blocks.length || s.segment || s.physical) : segs;
      const others = B ? segs.filter((s) => !(s.blocks.length || s.segment || s.physical)) : [];
      let largest = null;
      for (const s of shown) {
        s.gaps = [];
        s.used = 0;
        let cursor = s.addr;
        for (const i of s.blocks) {
          if (B.addr[i] > cursor) s.gaps.push([cursor, B.addr[i] - cursor]);
          cursor = Math.max(cursor, B.addr[i] + B.size[i]);
          s.used += B.size[i];
        }
        if (!B) s.used = s.size;
        else if (s.addr + s.size > cursor) s.gaps.push([cursor, s.addr + s.size - cursor]);
        for (const g of s.gaps) if (!largest || g[1] > largest[1]) largest = g;
      }
      return { segs: shown, others, outside, outsideBytes, largest };
    }

    function exactness(t) {
      // At a moment the report measured, it says how much of what was live is drawn.
      const lv = blockLevel || memoryLevel;
      const moment = [lv.peak].concat(lv.ooms).find((m) => m.time === t);
      if (moment) {
        return moment.shown_bytes === moment.bytes ? `Exact: every ${blockLevel ? "block" : "allocation"} live then is placed.`
          : `${bytes(moment.shown_bytes)} of the ${bytes(moment.bytes)} live then are placed; the rest gave way to the page's limit.`;
      }
      if (!lv.aggregated) return "Exact: every allocation of the run is a band.";
      const aggregated = GM.aggregateAt(lv, t).reduce((a, v) => a + v, 0);
      return aggregated ? `About ${bytes(aggregated)} live around this moment was aggregated by gpumem-report and is not placed: ` +
        "the maps at the peak and at each OOM are exact." : "Every allocation live around this moment is placed.";
    }

    // Why the request of an OOM incident failed, in the map's terms.
    function refusal(incident, largest, free, reserved) {
      const req = bytes(incident.requested);
      if (incident.verdict === "allocator limit") {
        return ` The allocator's own cap refused the request of ${req} with ${bytes(reserved)} reserved` +
          (incident.device_free !== null && incident.device_free !== undefined ? `, though the device had ${bytes(incident.device_free)} free` : "") +
          (incident.cap && incident.cap.bytes ? ` (its cap: ${bytes(incident.cap.bytes)})` : "") + ": an allocator limit, not a full device.";
      }
      if (incident.requested <= largest) return ` The request of ${req} fits in the largest free block (${bytes(largest)}).`;
      if (free >= incident.requested) {
        return ` The request of ${req} is larger than the largest free block (${bytes(largest)}), though ${bytes(free)} is free in all: fragmentation.`;
      }
      const device = incident.device_free !== null && incident.device_free !== undefined
        ? `; the device had ${bytes(incident.device_free)} free for a new segment` : "";
      return ` The request of ${req} is larger than the largest free block (${bytes(largest)})${device}` +
        (incident.verdict ? ` (${incident.verdict}).` : ".");
    }

    function show(t, label, highlight, live) {
      const m = mapAt(t, live);
      view.current = { t, label, map: m };
      title.textContent = label && live ? `Segments ${label}` : `Segments at ${seconds(t)}${label ? ` (${label})` : ""}`;
      const reserved = m.segs.reduce((a, s) => a + s.size, 0), used = m.segs.reduce((a, s) => a + s.used, 0);
      const gaps = m.segs.reduce((a, s) => a + s.gaps.length, 0);
      const nBlocks = m.segs.reduce((a, s) => a + s.blocks.length, 0);
      let text = `${m.segs.length} segment${m.segs.length === 1 ? "" : "s"}, ${bytes(reserved)} reserved; ` +
        (B ? `${bytes(used)} in ${nBlocks} block${nBlocks === 1 ? "" : "s"}; ${bytes(reserved - used)} free in ${gaps} gap${gaps === 1 ? "" : "s"}; ` +
          `largest free block ${bytes(m.largest ? m.largest[1] : 0)}.` : "no block data: each CUDA allocation is one segment, all in use.");
      const incident = live ? null : incidents.find((o) => o.time === t);
      if (incident && B) text += refusal(incident, m.largest ? m.largest[1] : 0, reserved - used, reserved);
      if (m.others.length) text += ` Besides: ${m.others.length} other CUDA allocation${m.others.length === 1 ? "" : "s"} (${bytes(m.others.reduce((a, s) => a + s.size, 0))}) outside the allocator.`;
      if (m.outside) text += ` ${m.outside} block${m.outside === 1 ? "" : "s"} (${bytes(m.outsideBytes)}) lie in no recorded segment.`;
      summary.textContent = text;
      note.textContent = live ? history_note() : exactness(t);
      buttons.querySelectorAll("button").forEach((b, i) => b.classList.toggle("active", moments[i][1] === t));
      draw(m, highlight);
      const rows = m.segs.slice().sort((a, b) => b.size - a.size).map((s) => [
        `0x${s.addr.toString(16)}`, bytes(s.size), String(s.blocks.length), bytes(s.used), bytes(s.size - s.used),
        bytes(s.gaps.reduce((a, g) => Math.max(a, g[1]), 0)),
        s.physical ? `expandable segment (${s.bands.length} chunk${s.bands.length === 1 ? "" : "s"})` : h("span", {}, GM.breakable(h, GM.stackLines(tl, M.stack[s.bands[0]])[0]))]);
      tableEl.replaceChildren(table(["Address", "Size", "Blocks", "In use", "Free", "Largest free", "Allocated by"], rows, "No segment is live at this moment.", [1, 2, 3, 4, 5]));
      tableTitle.textContent = `The ${m.segs.length} segment${m.segs.length === 1 ? "" : "s"}, largest first`;
      if (m.segs.length <= 12) tableBox.open = true;
      drawLegend(m);
    }

    function history_note() {
      const lv = blockLevel || memoryLevel;
      return lv.aggregated ? `${lv.aggregated.toLocaleString("en")} allocations were aggregated by gpumem-report and are not in the history.`
        : "Exact: every allocation of the run is in the history.";
    }

    // What the colours mean: the roles of the blocks drawn, a free gap, the largest free block.
    function drawLegend(m) {
      const roles = new Set();
      for (const s of m.segs) {
        if (B) s.blocks.forEach((i) => roles.add(B.role[i]));
        else s.bands.forEach((i) => roles.add(M.role[i]));
      }
      const item = (swatch, text) => h("li", {}, h("span", { class: `swatch ${swatch.cls || ""}`, style: swatch.style || "" }), text);
      legend.replaceChildren(...[...roles].sort((a, b) => a - b).map((r) =>
        item({ style: `background:${GM.ROLE_COLORS[r]}` }, B ? `block: ${GM.roleName(tl, r)}` : `allocation: ${GM.roleName(tl, r)}`)),
      B ? item({ cls: "free" }, "free in a segment") : null,
      B ? item({ cls: "largest" }, "the largest free block") : null,
      item({ cls: "segment" }, "a segment (its width: its size)"));
    }

    let layout = null;
    function draw(m, highlight) {
      const width = Math.max(360, wrap.clientWidth || 900), dpr = window.devicePixelRatio || 1;
      const total = m.segs.reduce((a, s) => a + s.size, 0);
      const largestSeg = m.segs.reduce((a, s) => Math.max(a, s.size), 0);
      const rowBytes = Math.max(largestSeg, total / 16, 1);
      // Segments flow left to right in address order, wrapping; a row holds rowBytes.
      const boxes = [];
      let x = 0, row = 0;
      for (const s of m.segs) {
        const w = Math.max(MIN_WIDTH, (s.size / rowBytes) * width);
        if (x > 0 && x + w > width + 0.5) { x = 0; row++; }
        boxes.push({ s, x, y: row * (ROW + GAP), w });
        x += w + 2;
      }
      const height = Math.max(ROW, (row + 1) * (ROW + GAP));
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = `${width}px`;
      canvas.style.height = `${height}px`;
      const ctx = canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, width, height);
      for (const box of boxes) {
        const { s } = box, scale = box.w / s.size;
        ctx.fillStyle = "#f1f3f6";
        ctx.fillRect(box.x, box.y, box.w, ROW);
        if (!B) {
          ctx.fillStyle = GM.ROLE_COLORS[M.role[s.bands[0]]];
          ctx.fillRect(box.x, box.y, box.w, ROW);
        }
        for (const i of s.blocks) {
          ctx.fillStyle = GM.ROLE_COLORS[B.role[i]];
          ctx.fillRect(box.x + (B.addr[i] - s.addr) * scale, box.y, Math.max(0.5, B.size[i] * scale), ROW);
          if (highlight !== null && B.addr[i] === highlight) {
            ctx.strokeStyle = "#111"; ctx.lineWidth = 2;
            ctx.strokeRect(box.x + (B.addr[i] - s.addr) * scale, box.y + 1, Math.max(2, B.size[i] * scale), ROW - 2);
          }
        }
        ctx.strokeStyle = "#4b6584"; ctx.lineWidth = 1;
        ctx.strokeRect(box.x + 0.5, box.y + 0.5, box.w - 1, ROW - 1);
        if (m.largest && m.largest[0] >= s.addr && m.largest[0] < s.addr + s.size) {
          ctx.strokeStyle = "#d63031"; ctx.lineWidth = 2;
          ctx.strokeRect(box.x + (m.largest[0] - s.addr) * scale + 1, box.y + 1, Math.max(2, m.largest[1] * scale - 2), ROW - 2);
        }
      }
      layout = { boxes };
    }

    canvas.addEventListener("mousemove", (ev) => {
      if (!layout || !view.current) return;
      const r = canvas.getBoundingClientRect(), px = ev.clientX - r.left, py = ev.clientY - r.top;
      const box = layout.boxes.find((b) => px >= b.x && px < b.x + b.w && py >= b.y && py < b.y + ROW);
      if (!box) { tip.hidden = true; return; }
      const s = box.s, at = s.addr + ((px - box.x) / box.w) * s.size;
      const content = [h("div", { class: "tip-head" }, h("b", {}, `segment 0x${s.addr.toString(16)}`), ` · ${bytes(s.size)}, ${bytes(s.used)} in use`)];
      const block = B ? s.blocks.find((i) => B.addr[i] <= at && at < B.addr[i] + B.size[i]) : undefined;
      if (block !== undefined) {
        content.push(h("div", {}, h("b", {}, bytes(B.size[block])), ` block at 0x${B.addr[block].toString(16)} · ${GM.roleName(tl, B.role[block])}`),
          h("ol", { class: "tip-stack" }, GM.stackLines(tl, B.stack[block]).map((line) => h("li", {}, line))));
      } else {
        const gap = (s.gaps || []).find((g) => g[0] <= at && at < g[0] + g[1]);
        if (gap) content.push(h("div", {}, `free: ${bytes(gap[1])} at 0x${gap[0].toString(16)}`));
        content.push(h("ol", { class: "tip-stack" }, GM.stackLines(tl, M.stack[s.bands[0]]).map((line) => h("li", {}, line))));
      }
      tip.replaceChildren(...content);
      tip.hidden = false;
      tip.style.left = `${Math.min(px + 14, Math.max(0, (wrap.clientWidth || 900) - 380))}px`;
      tip.style.top = `${py + 14}px`;
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
    return view;
  };
})();
