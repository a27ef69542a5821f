// report/outputs/html/axis.js — the x axis every chart of one device shares: wall-clock time or the
// device's event index (memory_viz's axis: each memory event one step, so idle time takes no room),
// one range (zoom one chart, every chart follows) and one cursor (hover one chart, every chart shows
// the moment). Charts register with it: uPlot charts through hooks (GM.syncUplot), the canvas views
// by listening.
//
// Times are ns from the process's first event. The event index comes from the device's event clock
// (html_data.h, "clock": knots {time, event}; between two knots events are spread evenly in time).
// Pure arithmetic and listeners; no DOM.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  // Every chart of a device puts its plot between these margins (CSS pixels), so that one moment is
  // at one x on all of them: the uPlot charts (their y axis and right padding) and the canvas views.
  GM.PLOT_LEFT = 74;
  GM.PLOT_RIGHT = 10;

  // The last index i with xs[i] <= v (-1 when v < xs[0]).
  function floorIndex(xs, v) {
    let lo = 0, hi = xs.length - 1, at = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (xs[mid] <= v) { at = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return at;
  }

  // Piecewise-linear map from as[] to bs[] (both non-decreasing), clamped at the ends.
  function interpolate(as, bs, v) {
    if (!as.length) return 0;
    const i = floorIndex(as, v);
    if (i < 0) return bs[0];
    if (i >= as.length - 1) return bs[as.length - 1];
    const span = as[i + 1] - as[i];
    return span > 0 ? bs[i] + ((bs[i + 1] - bs[i]) * (v - as[i])) / span : bs[i + 1];
  }

  // clock: the device's {events, time[], event[]} or null; end: the run's last moment (ns);
  // mode: "events" or "time" at first (events only where the device has a clock).
  GM.deviceAxis = function (device, clock, end, mode) {
    const times = [], events = [];
    if (clock && clock.events) {
      clock.time.forEach((t, i) => { times.push(t); events.push(clock.event[i]); });
      // The run's end is one step after the last event.
      const last = times[times.length - 1];
      times.push(Math.max(end, last) + (end > last ? 0 : 1));
      events.push(clock.events);
    }
    const hasEvents = times.length > 1;
    const listeners = { range: [], mode: [], cursor: [] };
    const axis = {
      device,
      mode: hasEvents && mode === "events" ? "events" : "time",
      hasEvents,
      events: hasEvents ? clock.events : 0,
      range: [0, 1],
      cursor: null,  // ns, or null
      on(kind, fn) { listeners[kind].push(fn); },
      // ns -> x in the axis's units, and back.
      toX(t) { return axis.mode === "events" ? interpolate(times, events, t) : t; },
      toT(x) { return axis.mode === "events" ? interpolate(events, times, x) : x; },
      // The whole run: from shortly before the first memory event (start-up before it takes no room).
      home() {
        if (axis.mode === "events") return [-0.5, Math.max(1, axis.events) - 0.5];
        const first = hasEvents ? times[0] : 0, last = Math.max(first + 1, end);
        return [Math.max(0, first - 0.02 * (last - first)), last];
      },
      setRange(x0, x1, source) {
        if (!(x1 > x0)) return;
        axis.range = [x0, x1];
        listeners.range.forEach((fn) => fn(source));
      },
      reset(source) { const [a, b] = axis.home(); axis.setRange(a, b, source); },
      setMode(next) {
        if (next === axis.mode || (next === "events" && !hasEvents)) return;
        // Keep the moments in view: the range's ends in ns, mapped into the new units.
        const [t0, t1] = axis.range.map(axis.toT);
        const wasHome = axis.range.every((v, i) => Math.abs(v - axis.home()[i]) < 1e-9);
        axis.mode = next;
        if (wasHome) axis.range = axis.home(); else axis.range = [axis.toX(t0), axis.toX(t1)];
        if (!(axis.range[1] > axis.range[0])) axis.range = axis.home();
        listeners.mode.forEach((fn) => fn());
        listeners.range.forEach((fn) => fn(null));
      },
      setCursor(t, source) {
        axis.cursor = t;
        listeners.cursor.forEach((fn) => fn(source));
      },
      // A tick's text: seconds, or "#1,234" (the event's number).
      format(x) {
        return axis.mode === "events" ? `#${(Math.round(x) || 0).toLocaleString("en")}` : GM.seconds(x);
      },
      // Round tick values inside [x0, x1], about `target` of them.
      ticks(x0, x1, target) {
        const raw = (x1 - x0) / target, power = Math.pow(10, Math.floor(Math.log10(raw || 1)));
        let step = 10 * power;
        for (const m of [1, 2, 5, 10]) if (m * power >= raw) { step = m * power; break; }
        if (axis.mode === "events") step = Math.max(1, Math.round(step));
        const out = [];
        for (let v = Math.ceil(x0 / step) * step; v <= x1 + 1e-9 && out.length < 100; v += step) out.push(v);
        return out;
      },
    };
    axis.range = axis.home();
    return axis;
  };

  // Ties a uPlot chart to the axis: its x data are axis units, its x range and cursor the axis's.
  // Returns the options to merge into the chart's (scales.x, axes[0], hooks, cursor).
  GM.uplotAxisOptions = function (axis) {
    let applying = false;
    const chart = { plot: null };
    const options = {
      scales: { x: { time: false, auto: false, range: () => axis.range.slice() } },
      xAxis: { values: (u, vals) => vals.map((v) => axis.format(v)), splits: (u, i, min, max) => axis.ticks(min, max, Math.max(2, Math.floor(u.bbox.width / (window.devicePixelRatio || 1) / 110))) },
      cursor: {
        // Double-click: the whole run, on every chart of the device (uPlot's own would re-fit only this one).
        bind: { dblclick: () => () => { axis.reset(null); return null; } },
      },
      hooks: {
        setScale: [(u, key) => {
          if (key !== "x" || applying) return;
          const [x0, x1] = axis.range, eps = 1e-9 * Math.max(1, Math.abs(x1 - x0));
          if (Math.abs(u.scales.x.min - x0) <= eps && Math.abs(u.scales.x.max - x1) <= eps) return;  // its first scale: the axis's
          axis.setRange(u.scales.x.min, u.scales.x.max, u);
        }],
        setCursor: [(u) => {
          if (applying) return;
          const left = u.cursor.left;
          axis.setCursor(left === undefined || left === null || left < 0 ? null : axis.toT(u.posToVal(left, "x")), u);
        }],
      },
      attach(u, data) {
        chart.plot = u;
        axis.on("range", (source) => {
          if (source === u) return;
          applying = true;
          u.setScale("x", { min: axis.range[0], max: axis.range[1] });
          applying = false;
        });
        axis.on("cursor", (source) => {
          if (source === u) return;
          applying = true;
          const x = axis.cursor === null ? -10 : u.valToPos(axis.toX(axis.cursor), "x");
          u.setCursor({ left: x, top: axis.cursor === null ? -10 : Math.max(0, u.cursor.top || 10) });
          applying = false;
        });
        axis.on("mode", () => {
          applying = true;
          u.setData(data());
          u.setScale("x", { min: axis.range[0], max: axis.range[1] });
          applying = false;
        });
      },
    };
    return options;
  };
})();
