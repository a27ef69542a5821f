// report/outputs/html/tables.js — a table whose columns sort on a click (tests, top sites).
// Cells are DOM nodes or text made by the caller (text from the trace stays text).
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  // columns: [{ title, value(row) -> number|string (what it sorts by), cell(row) -> Node|string,
  // numeric }]; sort: [column index, 1 ascending | -1 descending]; limit: rows drawn (the rest counted).
  GM.sortableTable = function (ui, columns, rows, sort, limit) {
    const { h } = ui;
    const body = h("tbody", {});
    const more = h("p", { class: "muted" });
    const heads = columns.map((c, i) => h("th", { class: c.numeric ? "num sortable" : "sortable", "data-column": String(i), tabindex: "0" }, c.title));
    let [by, direction] = sort || [0, 1];
    function render() {
      const sorted = rows.slice().sort((a, b) => {
        const x = columns[by].value(a), y = columns[by].value(b);
        return (x < y ? -1 : x > y ? 1 : 0) * direction;
      });
      const shown = limit ? sorted.slice(0, limit) : sorted;
      body.replaceChildren(...shown.map((r) => h("tr", {}, columns.map((c) => h("td", { class: c.numeric ? "num" : "" }, c.cell(r))))));
      more.textContent = shown.length < sorted.length ? `… and ${sorted.length - shown.length} more` : "";
      heads.forEach((th, i) => th.setAttribute("aria-sort", i === by ? (direction > 0 ? "ascending" : "descending") : "none"));
    }
    heads.forEach((th, i) => {
      const click = () => {
        if (by === i) direction = -direction;
        else { by = i; direction = columns[i].numeric ? -1 : 1; }
        render();
      };
      th.addEventListener("click", click);
      th.addEventListener("keydown", (ev) => { if (ev.key === "Enter") click(); });
    });
    render();
    return h("div", { class: "table-wrap" }, h("table", { class: "sortable" }, h("thead", {}, h("tr", {}, heads)), body), more);
  };
})();
