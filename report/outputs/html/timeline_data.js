// report/outputs/html/timeline_data.js — reads the allocation timelines the page carries
// (report/outputs/html_data.h: bands as columns, stacks and frames once each) into typed arrays, and
// answers what the views ask: what was live at a moment, a stack's lines and frames, colours, sizes
// and times as text.
//
// Every function here is pure over the decoded data; nothing touches the DOM. Text from the trace is
// returned as strings for the callers to put on the page with textContent.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  // Sizes and times as the text report writes them: "1.50 GiB", "12.3 ms".
  GM.bytes = function (n) {
    if (n === undefined || n === null) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = Number(n), i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`;
  };
  GM.seconds = function (ns) {
    const s = Number(ns) / 1e9;
    if (Math.abs(s) >= 100) return `${s.toFixed(0)} s`;
    if (Math.abs(s) >= 1) return `${s.toFixed(2)} s`;
    if (Math.abs(s) >= 1e-3) return `${(s * 1e3).toFixed(1)} ms`;
    return `${(s * 1e6).toFixed(0)} µs`;
  };

  // Role colours, in the order of the report's roles (report_model.h Role): the same as the
  // "Reserved memory by role" chart.
  GM.ROLE_COLORS = ["#3867d6", "#eb3b5a", "#8854d0", "#f0932b", "#20bf6b", "#0fb9b1", "#a5b1c2", "#4b6584"];

  // A colour per stack: hues spread by the golden angle, so neighbouring indices differ.
  GM.stackColor = function (stack) {
    if (stack < 0) return "#b8c2cc";
    const hue = Math.round((stack * 137.508) % 360);
    return `hsl(${hue}, 55%, 60%)`;
  };

  const FLAG_LIVE_AT_END = 16, FLAG_SEGMENT = 32, FLAG_PHYSICAL = 64;
  GM.WHY = [[1, "live at the peak"], [2, "live at an OOM"], [4, "live at the end"], [8, "among the largest"]];

  // One level (blocks or CUDA level) of one device: the bands as typed arrays, times in ns from the
  // process's first event.
  GM.decodeLevel = function (level) {
    if (!level) return null;
    const b = level.bands, n = b.n;
    const start = new Float64Array(n), end = new Float64Array(n), size = new Float64Array(n),
      addr = new Float64Array(n), stack = new Int32Array(n), role = new Uint8Array(n), flags = new Uint8Array(n);
    let t = 0;
    for (let i = 0; i < n; i++) {
      t += b.start[i];
      start[i] = t;
      end[i] = t + b.duration[i];
      size[i] = b.size[i];
      addr[i] = b.addr[i] < 0 ? -1 : b.base + b.addr[i];
      stack[i] = b.stack[i];
      role[i] = b.role[i];
      flags[i] = b.flags[i];
    }
    let top = 0;
    for (const v of level.live_max) top = Math.max(top, v);
    return { raw: level, n, start, end, size, addr, stack, role, flags, liveMaxTop: top };
  };

  // Live at t: allocated at or before it and freed after it; what is live at the end is live up to
  // and at the trace's last moment.
  GM.isLiveAt = (L, i, t) => L.start[i] <= t && (t < L.end[i] || (t === L.end[i] && (L.flags[i] & FLAG_LIVE_AT_END) !== 0));
  GM.isSegment = (L, i) => (L.flags[i] & FLAG_SEGMENT) !== 0;
  GM.isPhysical = (L, i) => (L.flags[i] & FLAG_PHYSICAL) !== 0;
  GM.liveAtEnd = (L, i) => (L.flags[i] & FLAG_LIVE_AT_END) !== 0;

  // Indices of the bands live at `t`, in the order they were allocated (bands are sorted by start).
  GM.liveAt = function (L, t) {
    const out = [];
    if (!L) return out;
    for (let i = 0; i < L.n && L.start[i] <= t; i++) {
      if (GM.isLiveAt(L, i, t)) out.push(i);
    }
    return out;
  };

  // The aggregated bytes of each group in the bucket that holds `t` (0 outside the buckets).
  GM.aggregateAt = function (level, t) {
    const i = Math.floor((t - level.origin) / level.bucket_ns);
    return level.groups.map((g) => (i >= 0 && i < g.average.length ? g.average[i] : 0));
  };
  GM.liveMaxAt = function (level, t) {
    const i = Math.floor((t - level.origin) / level.bucket_ns);
    return i >= 0 && i < level.live_max.length ? level.live_max[i] : 0;
  };

  // A stack of the timeline's table as the text report shows it: lines of text.
  GM.stackLines = function (tl, index) {
    const s = tl.stacks[index];
    if (!s) return ["(no stack)"];
    return s.v.map((item) => {
      if (typeof item === "string") return item;
      const f = tl.frames[item];
      return f[1] ? `${f[0]} (${f[1]})` : f[0];
    });
  };

  // Its frames, innermost first, as objects the flame graphs read: function, location, kind
  // ('p' Python, 'u' the program's, 'l' a library's, 'i' the profiler's and CUDA's), group.
  GM.stackFrames = function (tl, index) {
    const s = tl.stacks[index];
    if (!s) return [];
    return s.f.map((i) => {
      const f = tl.frames[i];
      return { function: f[0], where: f[1], kind: f[2], group: f[3] };
    });
  };

  GM.roleName = (tl, role) => (tl.roles && tl.roles[role]) || "other";
})();
