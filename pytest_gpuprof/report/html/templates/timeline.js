"use strict";
// The report's GPU timelines (one per test: baseline run above current run, one time scale),
// drawn as SVG from each .timeline's JSON, whose runs point into the page's one list of
// samples (#timeline-samples), once its test is unfolded (perfetto.js has the Perfetto buttons): per host
// thread its annotation ranges (where the GPU ran their work) and its CUDA API calls (at
// their CPU times, each synchronization marked), then a lane per stream.  At every zoom,
// two or more activities narrower than 2 px that follow each other within 1 px are drawn
// as one bar (its title says what it holds); a lone one is drawn as itself, at least 1 px
// wide; a kernel whose own verdict broke is marked whatever its width, a merged bar
// carrying the marks of what it holds.
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const LABEL = 200, RIGHT = 12, LANE = 16, GAP = 4, RANGE_ROW = 14, CALL_ROW = 14, MARK = 7, HEAD = 22, AXIS = 30, LINE = 12;
  const MIN_SPAN_NS = 100;

  // each full kernel name once in the page (#kernel-names); a box's, where its short form is not it
  const NAMES = JSON.parse(document.getElementById("kernel-names").textContent);
  // each drawn sample once (page.py, _shared_samples), with the words of kinds and calls
  const SHARED = JSON.parse(document.getElementById("timeline-samples").textContent);
  function fullName(run, i) {
    return run.k[i] == null ? run.names[i] : NAMES[run.k[i]];
  }

  // as the report's other times (numbers.py): ns, then 4 significant digits in µs, ms or s
  function duration(ns) {
    const a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + " ns";
    const [value, unit] = a < 1e6 ? [ns / 1e3, " \u00b5s"] : a < 1e9 ? [ns / 1e6, " ms"] : [ns / 1e9, " s"];
    return String(+value.toPrecision(4)) + unit;
  }

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function titled(e, text) {
    e.appendChild(el("title", {}, text));
    return e;
  }

  function fit(text, px) {  // what of a label fits in px (monospace 11px: ~6.6 px a character)
    const n = Math.floor((px - 6) / 6.6);
    return n < 3 ? "" : text.length <= n ? text : text.slice(0, n - 1) + "\u2026";
  }

  function wrap(text, px) {  // a label as the lines that fit in px, broken at spaces
    const n = Math.floor((px - 6) / 6.6), lines = [];
    let line = "";
    for (const word of text.split(" ")) {
      if (line && (line + " " + word).length > n) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    }
    lines.push(line);
    return lines.map(l => fit(l, px));
  }

  function label(g, text, y, minHeight) {  // a row's label, wrapped; the row's height
    const lines = wrap(text, LABEL);
    const t = el("text", {x: LABEL - 6, y: y + 11, class: "lanelabel"});
    lines.forEach((line, i) => t.appendChild(el("tspan", {x: LABEL - 6, y: y + 11 + i * LINE}, line)));
    g.appendChild(t);
    return Math.max(minHeight, lines.length * LINE + 2);
  }

  function threadName(run, ti) {  // the trace's name of a thread, else its id
    return (run.thread_names && run.thread_names[ti]) || "thread " + run.threads[ti];
  }

  function Timeline(root) {
    const runs = JSON.parse(root.querySelector(".tl-data").textContent).runs
      .map(r => r.missing ? r : {...SHARED.samples[r.sample], label: r.label, marked: r.marked});
    const plot = root.querySelector(".tl-plot"), readout = root.querySelector(".tl-range");
    const drawn = runs.filter(r => !r.missing);
    const full = Math.max(1, ...drawn.map(r => r.span));
    // the CPU's calls may start before the step's first GPU activity or end after its last
    const lo = Math.min(-0.05 * full, ...drawn.flatMap(r => r.calls.map(c => c[2])));
    const hi = Math.max(full * 1.05, ...drawn.flatMap(r => r.calls.map(c => c[2] + c[3])));
    let v0 = 0, v1 = full;

    function set(a, b) {
      let span = Math.max(b - a, MIN_SPAN_NS);
      span = Math.min(span, hi - lo);
      a = Math.min(Math.max(a, lo), hi - span);
      v0 = a; v1 = a + span;
      draw();
    }
    function zoom(factor, at) {  // at: the time kept in place
      at = at === undefined ? (v0 + v1) / 2 : at;
      set(at - (at - v0) * factor, at + (v1 - at) * factor);
    }
    function pan(fraction) { set(v0 + (v1 - v0) * fraction, v1 + (v1 - v0) * fraction); }

    function draw() {
      const width = Math.max(plot.clientWidth, 600), plotW = width - LABEL - RIGHT;
      const scale = plotW / (v1 - v0);
      const x = ns => LABEL + (ns - v0) * scale;
      const clipX = ns => Math.min(Math.max(x(ns), LABEL), LABEL + plotW);
      const svg = el("svg", {class: "tl", width: width});
      let y = 0;
      const body = el("g", {});
      for (const run of runs) {
        if (run.missing) {
          body.appendChild(el("text", {x: 4, y: y + 14, class: "runhead"}, run.label + ": " + run.missing));
          y += HEAD;
          continue;
        }
        const head = run.label + " run \u00b7 step " + run.step + " (median GPU busy time) \u00b7 span " +
          duration(run.span) + " \u00b7 " + run.events.length + " activities on " + run.streams.length +
          " stream(s)" + (run.calls.length ? " \u00b7 " + run.calls.length + " CUDA API calls" : "") +
          (run.truncated ? " \u00b7 truncated to the first events" : "");
        body.appendChild(el("text", {x: 4, y: y + 14, class: "runhead"}, head));
        y += HEAD;
        y = drawThreads(body, run, y, clipX, scale, plotW);
        y = drawLanes(body, run, y, x, clipX, scale, plotW);
        y += 4;
      }
      const axisY = y;
      body.appendChild(el("line", {x1: LABEL, y1: axisY, x2: LABEL + plotW, y2: axisY, class: "axis"}));
      const raw = (v1 - v0) / 8, mag = Math.pow(10, Math.floor(Math.log10(raw)));
      const step = [1, 2, 5, 10].map(f => f * mag).find(s => s >= raw);
      const [unit, div] = step >= 1e6 ? ["ms", 1e6] : step >= 1e3 ? ["us", 1e3] : ["ns", 1];
      for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
        const tx = x(t);
        body.appendChild(el("line", {x1: tx, y1: 0, x2: tx, y2: axisY, class: "gridline"}));
        body.appendChild(el("line", {x1: tx, y1: axisY, x2: tx, y2: axisY + 5, class: "axis"}));
        body.appendChild(el("text", {x: tx, y: axisY + 17, class: "tick"}, +(t / div).toPrecision(6) + " " + unit));
      }
      svg.setAttribute("height", axisY + AXIS);
      svg.setAttribute("viewBox", "0 0 " + width + " " + (axisY + AXIS));
      svg.appendChild(body);
      plot.replaceChildren(svg);
      readout.value = "visible (from the step's first GPU activity) " + duration(v0) + " \u2013 " + duration(v1) + " (" + duration(v1 - v0) + ")";
      readout.textContent = readout.value;
      readout.dataset.startNs = Math.round(v0);
      readout.dataset.endNs = Math.round(v1);
    }

    // One row of boxes: items ({start, end, cls, kind, title, text, mark, alone, attrs}, by
    // start) narrower than 2 px and within 1 px of each other drawn as one merged bar unless
    // alone; a lone one as itself; marks above every marked item at any width.
    function paint(body, items, y, height, clipX, scale, merged) {
      let group = null;
      const marks = [];
      const box = it => {
        const x0 = clipX(it.start), x1 = clipX(it.end), w = Math.max(x1 - x0, 1);
        const g = titled(el("g", {class: it.cls, ...it.attrs}), it.title);
        g.appendChild(el("rect", {x: x0, y: y + 1, width: Math.max(w - (w > 3 ? 0.6 : 0), 1), height: height - 2}));
        const text = fit(it.text, x1 - x0);
        if (text) g.appendChild(el("text", {x: x0 + 3, y: y + height / 2 + 4, class: "evlabel"}, text));
        body.appendChild(g);
      };
      const flush = () => {
        if (!group) return;
        if (group.items.length === 1) box(group.items[0]);
        else {
          const x0 = clipX(group.start), w = Math.max(clipX(group.end) - x0, 1);
          const busy = group.items.reduce((s, it) => s + it.end - it.start, 0);
          const kinds = new Set(group.items.map(it => it.kind));
          const broke = group.items.filter(it => it.mark);
          body.appendChild(titled(el("rect", {x: x0, y: y + 1, width: w, height: height - 2,
            class: merged.cls + " merged " + merged.prefix + (kinds.size === 1 ? [...kinds][0] : "mixed") +
              (broke.length ? " has-mark" : ""), "data-count": group.items.length,
            "data-run": group.items[0].attrs["data-run"],
            "fill-opacity": Math.max(0.35, Math.min(1, busy / Math.max(group.end - group.start, 1)))}),
            group.items.length + " " + merged.what + " merged at this zoom: +" + duration(group.start) + " \u2026 +" +
            duration(group.end) + ", busy " + duration(busy) + " (zoom in to tell them apart)\n" +
            merged.top(group.items) + (broke.length ? "\nbroke: " + [...new Set(broke.map(it => it.name + ": " +
              it.mark))].join("\n") : "")));
        }
        group = null;
      };
      for (const it of items) {
        if (it.end < v0 || it.start > v1) continue;
        if (it.mark) marks.push(it);
        if ((it.end - it.start) * scale < 2 && !it.alone) {
          if (group && (it.start - group.end) * scale < 1) {
            group.end = Math.max(group.end, it.end);
            group.items.push(it);
          } else {
            flush();
            group = {start: it.start, end: it.end, items: [it]};
          }
          continue;
        }
        flush();
        box(it);
      }
      flush();
      for (const it of marks) {
        const x0 = clipX(it.start), w = Math.max(clipX(it.end) - x0, 2);
        body.appendChild(titled(el(it.markShape || "rect", it.markShape ? {d: "M" + (x0 + w / 2 - 4) + " " + (y - 6) +
          "h8l-4 6z", class: "syncmark", ...it.attrs} : {x: x0, y: y - 3.5, width: w, height: 3, class: "mark",
          ...it.attrs}), it.name + ": " + it.mark));
      }
    }

    function top(items) {  // a merged bar's most frequent names, for its title
      const count = {};
      for (const it of items) count[it.name] = (count[it.name] || 0) + 1;
      return Object.entries(count).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([n, c]) => c + "\u00d7 " + n)
        .join("\n");
    }

    function drawThreads(body, run, y, clipX, scale, plotW) {
      // per thread: its ranges, a row per depth, each at the GPU span of the work launched in
      // it; then its CUDA API calls at their CPU times
      run.threads.forEach((thread, ti) => {
        const name = threadName(run, ti);
        const mine = run.ranges.filter(r => r[0] === ti);
        const depth = Math.max(-1, ...mine.map(r => r[1])) + 1;
        const idle = mine.filter(r => r[2] === null).length;
        for (let d = 0; d < depth; d++) {
          const g = el("g", {class: "lane ranges", "data-thread": thread, "data-depth": d});
          titled(g, "annotation ranges (NVTX, record_function, steps) of " + name + ", depth " + d +
            ", drawn where the GPU ran the work launched inside them" +
            (idle ? "; " + idle + " range(s) of this thread launched no sampled GPU work" : ""));
          const height = d === 0 ? label(g, "ranges \u00b7 " + name, y, RANGE_ROW) : RANGE_ROW;
          g.insertBefore(el("rect", {x: LABEL, y: y, width: plotW, height: height, class: "lanebg"}), g.firstChild);
          body.appendChild(g);
          for (const r of mine) {
            if (r[1] !== d || r[2] === null || r[3] < v0 || r[2] > v1) continue;
            const x0 = clipX(r[2]), w = Math.max(clipX(r[3]) - x0, 1), rname = run.range_names[r[6]];
            const box = titled(el("g", {class: "range"}), rname + "\nGPU +" + duration(r[2]) + " \u2026 +" +
              duration(r[3]) + " (" + duration(r[3] - r[2]) + ")\nCPU " + duration(r[4]) + " \u2026 " +
              duration(r[5]) + " (" + duration(r[5] - r[4]) + "; the CPU ran " + duration(r[2] - r[4]) + " ahead)");
            box.appendChild(el("rect", {x: x0, y: y + 1, width: w, height: RANGE_ROW - 2}));
            const text = fit(rname, w);
            if (text) box.appendChild(el("text", {x: x0 + 3, y: y + 11}, text));
            body.appendChild(box);
          }
          y += height + 2;
        }
        const calls = run.calls.filter(c => c[0] === ti);
        if (!calls.length) return;
        const syncs = calls.filter(c => c[1] === "sync").length;
        const g = titled(el("g", {class: "lane calls", "data-thread": thread}), "CUDA API calls of " + name + " (" +
          run.label + "): " + calls.length + " calls, " + syncs + " synchronization(s), at their CPU times" +
          " (those before the step's first GPU activity at negative times)");
        const height = label(g, "CUDA API \u00b7 " + name, y + MARK, CALL_ROW);
        g.insertBefore(el("rect", {x: LABEL, y: y + MARK, width: plotW, height: height, class: "lanebg"}), g.firstChild);
        body.appendChild(g);
        paint(body, calls.map(c => ({
          start: c[2], end: c[2] + c[3], cls: "call c-" + c[1], kind: c[1], text: run.call_names[c[4]], name: run.call_names[c[4]],
          title: run.call_names[c[4]] + " \u00b7 " + SHARED.calls[c[1]] + " \u00b7 " + name + "\nCPU +" +
            duration(c[2]) + " \u00b7 duration " + duration(c[3]),
          alone: c[1] === "sync", mark: c[1] === "sync" ? "the CPU waited " + duration(c[3]) + " for the GPU" : "",
          markShape: "path", attrs: {"data-run": run.label, "data-thread": thread, "data-call": c[1]},
        })), y + MARK, height, clipX, scale, {cls: "call", prefix: "c-", what: "calls", top: top});
        // the CPU may run far ahead of the GPU: the calls out of view are counted at the row's
        // ends, where no call in view lies under the words
        const before = calls.filter(c => c[2] + c[3] < v0).length, after = calls.filter(c => c[2] > v1).length;
        const free = (a, b) => !calls.some(c => c[2] + c[3] >= v0 && c[2] <= v1 &&
          clipX(c[2] + c[3]) >= a && clipX(c[2]) <= b);
        const hint = (text, x0, anchor) => {
          const w = text.length * 6.3;
          if (free(anchor ? x0 - w : x0, anchor ? x0 : x0 + w)) {
            body.appendChild(el("text", {x: x0, y: y + MARK + 11, class: "tl-off" + (anchor ? " end" : "")}, text));
          }
        };
        if (before) hint("\u25c0 " + before + " earlier call(s): pan left", LABEL + 3, false);
        if (after) hint(after + " later call(s): pan right \u25b6", LABEL + plotW - 3, true);
        y += MARK + height + 2;
      });
      return y + (run.threads.length ? 4 : 0);
    }

    function drawLanes(body, run, y, x, clipX, scale, plotW) {
      run.streams.forEach((stream, lane) => {
        const mine = run.events.filter(e => e[0] === lane);
        const busy = mine.reduce((s, e) => s + e[3], 0);
        const g = titled(el("g", {class: "lane stream", "data-stream": stream.id}),
          "stream " + stream.id + " (" + run.label + "): " + stream.role + ", " + mine.length +
          " activities, busy " + duration(busy));
        const height = label(g, "stream " + stream.id + " \u00b7 " + stream.role, y, LANE);
        g.insertBefore(el("rect", {x: LABEL, y: y, width: plotW, height: height, class: "lanebg"}), g.firstChild);
        body.appendChild(g);
        paint(body, mine.map(e => ({
          start: e[2], end: e[2] + e[3], cls: "ev k-" + e[1], kind: e[1], text: run.labels[e[4]], name: run.names[e[4]],
          title: fullName(run, e[4]) + "\n" + (SHARED.labels[e[1]] || e[1]) + " \u00b7 stream " + stream.id + "\nstart +" +
            duration(e[2]) + " \u00b7 duration " + duration(e[3]) + (run.marked[e[4]] ? "\nbroke: " + run.marked[e[4]] : ""),
          mark: run.marked[e[4]], attrs: {"data-run": run.label, "data-stream": stream.id, "data-name": e[4]},
        })), y, height, clipX, scale, {cls: "ev", prefix: "k-", what: "activities", top: top});
        y += height + GAP;
      });
      return y;
    }

    root.querySelector(".tl-bar").addEventListener("click", ev => {
      const act = ev.target.dataset && ev.target.dataset.act;
      if (act === "in") zoom(0.5);
      else if (act === "out") zoom(2);
      else if (act === "left") pan(-0.25);
      else if (act === "right") pan(0.25);
      else if (act === "reset") set(0, full);
    });
    const timeAt = clientX => {
      const box = plot.getBoundingClientRect();
      const plotW = Math.max(plot.clientWidth, 600) - LABEL - RIGHT;
      return v0 + (clientX - box.left - LABEL) / plotW * (v1 - v0);
    };
    plot.addEventListener("wheel", ev => {
      if (ev.ctrlKey || ev.metaKey) {
        ev.preventDefault();
        zoom(Math.pow(1.0015, ev.deltaY), timeAt(ev.clientX));
      } else if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
        ev.preventDefault();
        pan((ev.deltaX || ev.deltaY) / 1000);
      }
    }, {passive: false});
    let drag = null;
    plot.addEventListener("pointerdown", ev => { drag = {x: ev.clientX, v0: v0, v1: v1}; plot.setPointerCapture(ev.pointerId); });
    plot.addEventListener("pointermove", ev => {
      if (!drag) return;
      const plotW = Math.max(plot.clientWidth, 600) - LABEL - RIGHT;
      const shift = (drag.x - ev.clientX) / plotW * (drag.v1 - drag.v0);
      if (Math.abs(drag.x - ev.clientX) > 2) set(drag.v0 + shift, drag.v1 + shift);
    });
    plot.addEventListener("pointerup", () => { drag = null; });
    window.addEventListener("resize", draw);
    const folded = root.closest("details");
    if (folded) folded.addEventListener("toggle", draw);  // drawn again at its width once unfolded
    draw();
  }

  document.querySelectorAll(".timeline").forEach(Timeline);
  document.addEventListener("details-built", ev => ev.target.querySelectorAll(".timeline").forEach(Timeline));
})();
