// report/outputs/html/stacks.js — stacks on the page: the document's stack table put back into the
// report (each `stack` a list of frames again, with the text report's view and the flame graph's
// path beside it), the line a table row is named by (the first frame that tells it from the other
// rows, not only the top one), the flame graph's path of a stack, and the cells that show a stack.
//
// A frame here: {function, file, line, module, lang} as the JSON report has it, plus `name` (the
// text report's name: C++ names shortened) and `where` (its location). A stack: an array of frames,
// innermost first, with `view` (the text report's lines), `viewFrames` (the frame each line shows,
// or null for a fold line) and `flame` (the flame graph's path: frames, and fold nodes {name, fold}).
// Text from the trace reaches the page only through text nodes.
(function () {
  "use strict";
  const GM = window.GpuMem || (window.GpuMem = {});

  const basename = (path) => String(path || "").split(/[\\/]/).pop();

  // "name (file.py:12)": a frame's short label (the file's name without its folders).
  GM.frameLabel = function (f) {
    if (!f) return "";
    if (f.fold) return f.name;
    const name = f.name || f.function || "??";
    const where = f.file ? `${basename(f.file)}${f.line ? ":" + f.line : ""}` : basename(f.where || "");
    return where ? `${name} (${where})` : name;
  };

  // The document keeps each distinct stack once (html_data.h): every "stack" is an index into
  // stack_table. Put the frames back.
  GM.restoreStacks = function (doc) {
    const table = (doc.stack_table || []).map((entry) => {
      const frames = entry.frames.map((f, i) => ({ ...f, name: entry.text[i][0], where: entry.text[i][1] }));
      const line = (x) => (typeof x === "number" ? frames[x] : { name: x, fold: true });
      frames.viewFrames = entry.view.map((x) => (typeof x === "number" ? frames[x] : null));
      frames.view = entry.view.map((x) => {
        if (typeof x !== "number") return x;
        const f = frames[x];
        return f.where ? `${f.name} (${f.where})` : f.name;
      });
      frames.flame = entry.flame.map(line);
      return frames;
    });
    const visit = (v) => {
      if (Array.isArray(v)) { v.forEach(visit); return; }
      if (!v || typeof v !== "object") return;
      for (const [key, item] of Object.entries(v)) {
        if (key === "stack" && typeof item === "number" && table[item]) v.stack = table[item];
        else if (key !== "stack_table") visit(item);
      }
    };
    visit(doc);
  };

  // A stack of an allocation timeline (timeline_data.js's frames) in the same shape.
  GM.timelineStack = function (tl, index) {
    const s = tl.stacks[index];
    if (!s) return Object.assign([], { view: ["(no stack)"], viewFrames: [null], flame: [] });
    const frame = (i) => {
      const f = tl.frames[i];
      return { name: f[0], function: f[0], where: f[1], kind: f[2], group: f[3] };
    };
    const frames = s.f.map(frame);
    const line = (x) => (typeof x === "number" ? frame(x) : { name: x, fold: true });
    frames.viewFrames = s.v.map((x) => (typeof x === "number" ? frame(x) : null));
    frames.view = GM.stackLines(tl, index);
    frames.flame = (s.g || s.f).map(line);
    return frames;
  };

  // The line a stack is known by: its view's first line, short (the file without its folders).
  GM.headline = function (stack) {
    if (!stack || !stack.length) return "(no stack)";
    if (stack.viewFrames && stack.viewFrames.length) {
      return stack.viewFrames[0] ? GM.frameLabel(stack.viewFrames[0]) : stack.view[0];
    }
    return GM.frameLabel(stack[0]);
  };

  const keyOf = (f) => (f.fold ? f.name : `${f.name || f.function}\u0000${f.file || f.where || ""}\u0000${f.line || ""}`);
  const pathOf = (stack) => (stack && stack.flame && stack.flame.length ? stack.flame : stack || []);

  // Names for the rows of one table: each row's headline, and where other rows share it, the first
  // frame (innermost first, on the flame graph's path: no interpreter or profiler frames) at which it
  // parts from the row most like it. Returns [{head, differs}] (differs: a label, or null).
  GM.distinctLabels = function (stacks) {
    const heads = stacks.map(GM.headline);
    const keys = stacks.map((s) => pathOf(s).map(keyOf));
    const joined = keys.map((k) => k.join("\n"));
    return stacks.map((s, i) => {
      let at = -1;
      heads.forEach((head, j) => {
        if (j === i || head !== heads[i] || joined[j] === joined[i]) return;
        let d = 0;
        while (d < keys[i].length && d < keys[j].length && keys[i][d] === keys[j][d]) d++;
        at = Math.max(at, d);
      });
      const path = pathOf(s);
      return { head: heads[i], differs: at >= 0 && at < path.length ? GM.frameLabel(path[at]) : null };
    });
  };

  // Text a table cell may break anywhere a path or a qualified name has a separator (after `/`, `\`,
  // `::`, `.`, `,`), and nowhere else: a word never breaks in the middle.
  GM.breakable = function (h, text) {
    const parts = String(text).split(/(?<=[\\/,]|::)|(?<=\.)(?=[A-Za-z_<])/);
    const out = [];
    parts.forEach((part, i) => { if (i) out.push(h("wbr", {})); out.push(part); });
    return out;
  };

  // A stack in a table cell: its label (the distinct one when given); open, the text report's lines,
  // and again for every recorded frame.
  GM.stackCell = function (h, stack, label) {
    const frames = stack || [];
    if (!frames.length) return h("span", { class: "muted" }, "(no stack)");
    const name = label || { head: GM.headline(frames), differs: null };
    const summary = h("summary", {}, h("span", { class: "head" }, GM.breakable(h, name.head)),
      name.differs ? h("span", { class: "differs" }, " · ", GM.breakable(h, name.differs)) : null);
    const all = h("ol", {}, frames.map((f) => h("li", { class: f.lang === "python" || f.kind === "p" ? "py" : f.kind === "i" ? "internal" : "" },
      h("span", { class: "fn" }, GM.breakable(h, f.function || f.name || "??")),
      f.file ? h("span", { class: "where" }, " ", GM.breakable(h, `${f.file}${f.line ? ":" + f.line : ""}`)) :
        f.module ? h("span", { class: "where" }, " ", GM.breakable(h, f.module)) : null)));
    return h("details", { class: "stack" }, summary,
      h("ul", { class: "view" }, (frames.view || []).map((line) => h("li", { class: /^\[/.test(line) ? "fold" : "" }, GM.breakable(h, line)))),
      h("details", { class: "frames" }, h("summary", {}, `all ${frames.length} frames`), all));
  };

  // The flame graph's path of a stack, root first: the folded path, or every recorded frame.
  GM.flamePath = function (stack, everyFrame) {
    const frames = stack || [];
    const path = everyFrame || !frames.flame ? frames : frames.flame;
    return path.slice().reverse();
  };
})();
