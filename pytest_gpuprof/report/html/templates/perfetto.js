// The report's "Open trace in Perfetto" buttons (report.html.j2 inlines this file).
(function () {
  "use strict";
  // Perfetto's UI takes a trace posted from another page: open it, PING until it answers
  // PONG, then post the bytes (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui).
  const PERFETTO = "https://ui.perfetto.dev";
  // How long Perfetto may take to answer before the page says it did not.
  const ANSWER_MS = 30000;
  // A page opened from disk may not read the files beside it: it says what to do instead,
  // before opening any window.
  const FROM_DISK = location.protocol === "file:";
  function Perfetto(root) {
    const state = root.querySelector(".perfetto-state"), input = root.querySelector("input[type=file]");
    const name = root.dataset.name, href = root.dataset.href;
    function say(text) { state.textContent = text; }
    function post(win, buffer) {
      say("waiting for Perfetto…");
      const timer = setInterval(() => win.postMessage("PING", PERFETTO), 50);
      const answer = ev => {
        if (ev.source !== win || ev.data !== "PONG") return;
        stop();
        win.postMessage({perfetto: {buffer: buffer, title: name, fileName: name}}, PERFETTO);
        say("sent to Perfetto");
      };
      const late = setTimeout(() => {
        stop();
        say("Perfetto did not answer in " + ANSWER_MS / 1000 + " s: is " + PERFETTO + " reachable from this browser?");
      }, ANSWER_MS);
      function stop() {
        clearInterval(timer);
        clearTimeout(late);
        window.removeEventListener("message", answer);
      }
      window.addEventListener("message", answer);
    }
    root.querySelector(".open-perfetto").addEventListener("click", async () => {
      const picked = input.files && input.files[0];
      if (!picked && FROM_DISK) {
        const report = decodeURIComponent(location.pathname.split("/").pop());
        say("Opened from disk, this page cannot read " + href + ": serve its folder (python -m http.server in " +
          "the folder of " + report + ", then open http://localhost:8000/" + report + ") or pick the file.");
        return;
      }
      const win = window.open(PERFETTO);
      if (!win) { say("the browser blocked the Perfetto window: allow pop-ups for this page"); return; }
      try {
        say(picked ? "reading " + picked.name + "…" : "fetching " + href + "…");
        const buffer = picked ? await picked.arrayBuffer() : await fetch(href).then(r => {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.arrayBuffer();
        });
        post(win, buffer);
      } catch (err) {
        win.close();
        say("this page cannot read " + href + " (" + err.message + "): pick the file, then click again");
      }
    });
    input.addEventListener("change", () => {
      say(input.files.length ? "picked: click Open trace in Perfetto" : "");
    });
  }

  document.querySelectorAll("p.perfetto").forEach(Perfetto);
  document.addEventListener("details-built", ev => ev.target.querySelectorAll("p.perfetto").forEach(Perfetto));
})();
