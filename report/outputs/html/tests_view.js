// report/outputs/html/tests_view.js — the scoped leak checks (every pytest test under gpumemtrace,
// gpumemtrace.scope(...)) as one sortable table: the test's name in full, its verdict, what it
// leaked, what it held until a garbage collection (cyclic garbage, not a leak), its own peak, when it
// ran; a row opens to the stacks of its leaks.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  GM.testsView = function (ui, scopes, t0) {
    const { h, bytes, seconds, stackCells } = ui;
    // A list of {bytes, count, stack}, each stack named by the line that tells it from the others.
    const stacks = (list) => {
      const cells = stackCells(list.map((l) => l.stack));
      return list.map((l, i) => h("div", { class: "leak" }, `${bytes(l.bytes)} in ${l.count}: `, cells[i]));
    };
    // A test that went over a limit of its own (pytest's gpu_memory_limit, gpu_leak_limit) failed for it.
    const over = (s) => s.over_own_limits || [];
    const overText = (s) => "over its " + over(s).map((l) => (s.api === "pytest" ? `gpu_${l}_limit` : `${l} limit`)).join(" and ");
    const verdict = (s) => (over(s).length ? overText(s) : s.checked === false ? "failed: not checked" : !s.closed ? "never ended" : s.leaked_bytes ? "leaked" : "clean");
    const tone = (s) => (over(s).length ? "bad" : s.checked === false || !s.closed ? "warn" : s.leaked_bytes ? "bad" : "good");
    const leaked = (s) => {
      if (!s.leaked_bytes) return h("span", { class: "muted" }, "–");
      return h("details", { class: "leaks" }, h("summary", {}, `${bytes(s.leaked_bytes)} in ${s.leaked_count}`),
        stacks(s.leaks || []),
        s.advice ? h("div", { class: "advice" }, s.advice) : null);
    };
    const held = (s) => {
      if (!s.held_until_gc_bytes) return h("span", { class: "muted" }, "–");
      return h("details", { class: "leaks" }, h("summary", {}, `${bytes(s.held_until_gc_bytes)} in ${s.held_until_gc_count}`),
        stacks(s.held_until_gc || []));
    };
    const columns = [
      { title: "Test", value: (s) => s.name, cell: (s) => h("span", { class: "test-name" }, GM.breakable(h, s.name)) },
      { title: "Result", value: (s) => (s.leaked_bytes || over(s).length ? 0 : s.checked === false || !s.closed ? 1 : 2), cell: (s) => h("span", { class: `result ${tone(s)}` }, verdict(s)) },
      { title: "Leaked", numeric: true, value: (s) => s.leaked_bytes || 0, cell: leaked },
      { title: "Held until GC", numeric: true, value: (s) => s.held_until_gc_bytes || 0, cell: held },
      { title: "Peak", numeric: true, value: (s) => s.peak_bytes || 0, cell: (s) => bytes(s.peak_bytes || 0) },
      { title: "Took", numeric: true, value: (s) => s.end_time_ns - s.begin_time_ns, cell: (s) => seconds(s.end_time_ns - s.begin_time_ns) },
      { title: "Started at", numeric: true, value: (s) => s.begin_time_ns, cell: (s) => seconds(Math.max(0, s.begin_time_ns - t0)) },
    ];
    const leaking = scopes.filter((s) => s.leaked_bytes).length;
    return h("div", { class: "tests-view" },
      h("p", {}, `${scopes.length} test${scopes.length === 1 ? "" : "s"} or scope${scopes.length === 1 ? "" : "s"}; ${leaking} leaked. ` +
        "Leaked: allocated during the test and still live when it ended. Held until GC: still live when it ended too, " +
        "but freed by a later garbage collection (only a reference cycle kept it): not a leak. " +
        "Peak: the most it had allocated and live at once " +
        "(memory held before it began does not count). Click a column to sort."),
      GM.sortableTable(ui, columns, scopes, [2, -1]));
  };
})();
