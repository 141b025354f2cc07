"use strict";
// The report's GPU timelines (one per test: baseline run above current run, one time scale),
// drawn as SVG from each .timeline's JSON (perfetto.js has the Perfetto buttons); at
// every zoom, activities narrower than 2 px that follow each other within 1 px are drawn
// as one bar per lane (its title says how many), so a dense step stays legible.
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const LABEL = 200, RIGHT = 12, LANE = 16, GAP = 4, RANGE_ROW = 14, HEAD = 22, AXIS = 30;
  const MIN_SPAN_NS = 100;

  function duration(ns) {
    const a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + " ns";
    if (a < 1e6) return (ns / 1e3).toFixed(3) + " us";
    return (ns / 1e6).toFixed(6) + " ms";
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

  function Timeline(root) {
    const data = JSON.parse(root.querySelector(".tl-data").textContent);
    const plot = root.querySelector(".tl-plot"), readout = root.querySelector(".tl-range");
    const runs = data.runs;
    const full = Math.max(1, ...runs.filter(r => !r.missing).map(r => r.span));
    let v0 = 0, v1 = full;

    function set(a, b) {
      let span = Math.max(b - a, MIN_SPAN_NS);
      const lo = -0.05 * full, hi = full * 1.05;
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
          " stream(s)" + (run.truncated ? " \u00b7 truncated to the first events" : "");
        body.appendChild(el("text", {x: 4, y: y + 14, class: "runhead"}, head));
        y += HEAD;
        y = drawRanges(body, run, y, x, clipX, plotW);
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

    function drawRanges(body, run, y, x, clipX, plotW) {
      // rows per thread and depth; each range at the GPU span of the work launched in it
      run.threads.forEach((thread, ti) => {
        const mine = run.ranges.filter(r => r[0] === ti);
        const depth = Math.max(-1, ...mine.map(r => r[1])) + 1;
        const idle = mine.filter(r => r[2] === null).length;
        for (let d = 0; d < depth; d++) {
          const g = el("g", {class: "lane ranges", "data-thread": thread, "data-depth": d});
          const label = d === 0 ? "ranges \u00b7 thread " + thread : "";
          titled(g, "annotation ranges (NVTX, record_function, steps) of thread " + thread + ", depth " + d +
            ", drawn where the GPU ran the work launched inside them" +
            (idle ? "; " + idle + " range(s) of this thread launched no sampled GPU work" : ""));
          g.appendChild(el("rect", {x: LABEL, y: y, width: plotW, height: RANGE_ROW, class: "lanebg"}));
          g.appendChild(el("text", {x: LABEL - 6, y: y + 11, class: "lanelabel"}, label));
          body.appendChild(g);
          for (const r of mine) {
            if (r[1] !== d || r[2] === null || r[3] < v0 || r[2] > v1) continue;
            const x0 = clipX(r[2]), w = Math.max(clipX(r[3]) - x0, 1), name = run.range_names[r[6]];
            const box = titled(el("g", {class: "range"}), name + "\nGPU +" + duration(r[2]) + " \u2026 +" +
              duration(r[3]) + " (" + duration(r[3] - r[2]) + ")\nCPU " + duration(r[4]) + " \u2026 " +
              duration(r[5]) + " (" + duration(r[5] - r[4]) + "; the CPU ran " + duration(r[2] - r[4]) + " ahead)");
            box.appendChild(el("rect", {x: x0, y: y + 1, width: w, height: RANGE_ROW - 2}));
            const text = fit(name, w);
            if (text) box.appendChild(el("text", {x: x0 + 3, y: y + 11}, text));
            body.appendChild(box);
          }
          y += RANGE_ROW + 2;
        }
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
        g.appendChild(el("rect", {x: LABEL, y: y, width: plotW, height: LANE, class: "lanebg"}));
        g.appendChild(el("text", {x: LABEL - 6, y: y + 12, class: "lanelabel"}, fit("stream " + stream.id + " \u00b7 " + stream.role, LABEL)));
        body.appendChild(g);
        let group = null;
        const flush = () => {
          if (!group) return;
          const x0 = clipX(group.start), w = Math.max(clipX(group.end) - x0, 1);
          const top = Object.entries(group.names).sort((a, b) => b[1] - a[1]).slice(0, 4)
            .map(([n, c]) => c + "\u00d7 " + run.names[n]).join("\n");
          const r = titled(el("rect", {x: x0, y: y + 1, width: w, height: LANE - 2, class: "ev merged k-" + group.kind,
            "fill-opacity": Math.max(0.35, Math.min(1, group.busy / Math.max(group.end - group.start, 1)))}),
            group.count + " activities merged at this zoom: +" + duration(group.start) + " \u2026 +" +
            duration(group.end) + ", busy " + duration(group.busy) + " (zoom in to tell them apart)\n" + top);
          body.appendChild(r);
          group = null;
        };
        for (const e of mine) {
          const start = e[2], end = e[2] + e[3];
          if (end < v0 || start > v1) continue;
          const w = e[3] * scale;
          if (w < 2) {
            if (group && (start - group.end) * scale < 1) {
              group.end = Math.max(group.end, end); group.count++; group.busy += e[3];
              group.names[e[4]] = (group.names[e[4]] || 0) + 1;
              if (e[1] !== group.kind) group.kind = "mixed";
            } else {
              flush();
              group = {start: start, end: end, count: 1, busy: e[3], kind: e[1], names: {[e[4]]: 1}};
            }
            continue;
          }
          flush();
          const x0 = clipX(start), x1 = clipX(end), name = run.names[e[4]];
          const what = data.labels[e[1]] || e[1];
          const tip = run.full[e[4]] + "\n" + what + " \u00b7 stream " + stream.id + "\nstart +" + duration(start) +
            " \u00b7 duration " + duration(e[3]) + (run.marked[e[4]] ? (run.label === "current" ?
            "\nnew: absent from the baseline" : "\nvanished: absent from the current run") : "");
          const box = titled(el("g", {class: "ev k-" + e[1]}), tip);
          box.appendChild(el("rect", {x: x0, y: y + 1, width: Math.max(x1 - x0 - (x1 - x0 > 3 ? 0.6 : 0), 1), height: LANE - 2}));
          const text = fit(name, x1 - x0);
          if (text) box.appendChild(el("text", {x: x0 + 3, y: y + 12, class: "evlabel"}, text));
          if (run.marked[e[4]]) box.appendChild(el("rect", {x: x0, y: y - 3.5, width: Math.max(x1 - x0, 1.5), height: 3, class: "mark"}));
          body.appendChild(box);
        }
        flush();
        y += LANE + GAP;
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
})();
