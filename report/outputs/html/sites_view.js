// report/outputs/html/sites_view.js — the top call sites (report/analyses/top_sites.h), as memray's
// stats and heaptrack's sections list them: by bytes live at the peak, by bytes allocated over the
// run, by number of allocations, by temporary allocations (freed within a short time), per device
// and level, in one sortable table per ranking.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  GM.sitesView = function (ui, entries) {
    const { h, bytes, seconds, stackCell } = ui;
    const block = h("div", { class: "sites-view" });
    for (const e of entries) {
      // Each call site named by the line that tells it from the others of its device and level.
      const all = [...new Set([...e.at_peak, ...e.by_bytes, ...e.by_count, ...e.temporary])];
      const names = GM.distinctLabels(all.map((s) => s.stack));
      const label = new Map(all.map((s, i) => [s, names[i]]));
      const rankings = [["At the peak", e.at_peak, 1], ["Bytes allocated", e.by_bytes, 2], ["Allocations", e.by_count, 3],
        ["Temporary", e.temporary, 4]];
      const area = h("div", {});
      const buttons = rankings.map(([title]) => h("button", { type: "button" }, title));
      const columns = [
        { title: "Call site", value: (s) => label.get(s).head + (label.get(s).differs || ""), cell: (s) => stackCell(s.stack, label.get(s)) },
        { title: "At the peak", numeric: true, value: (s) => s.peak_bytes, cell: (s) => (s.peak_bytes ? bytes(s.peak_bytes) : "–") },
        { title: "Allocated", numeric: true, value: (s) => s.bytes, cell: (s) => bytes(s.bytes) },
        { title: "Allocations", numeric: true, value: (s) => s.count, cell: (s) => s.count.toLocaleString("en") },
        { title: "Temporary", numeric: true, value: (s) => s.temporary_count,
          cell: (s) => (s.temporary_count ? `${s.temporary_count.toLocaleString("en")} (${bytes(s.temporary_bytes)})` : "–") },
      ];
      const show = (i) => {
        buttons.forEach((b, j) => b.classList.toggle("active", i === j));
        const [, list, column] = rankings[i];
        area.replaceChildren(list.length ? GM.sortableTable(ui, columns, list, [column, -1]) : h("p", { class: "muted" }, "None."));
      };
      buttons.forEach((b, i) => b.addEventListener("click", () => show(i)));
      block.appendChild(h("h4", {}, `GPU ${e.device} · ${e.level === "block" ? "tensors (caching-allocator blocks)" : "CUDA allocations"}`,
        h("span", { class: "muted" }, ` · ${e.sites} call sites; temporary: freed within ${seconds(e.temporary_ns)}`)));
      block.appendChild(h("div", { class: "tabs" }, buttons));
      block.appendChild(area);
      show(0);
    }
    return block;
  };
})();
