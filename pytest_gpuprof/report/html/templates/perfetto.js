// The report's "Open trace in Perfetto" buttons (report.html.j2 inlines this file).
(function () {
  "use strict";
  // Perfetto's UI takes a trace posted from another page: open it, PING until it answers
  // PONG, then post the bytes (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui).
  const PERFETTO = "https://ui.perfetto.dev";
  function Perfetto(root) {
    const state = root.querySelector(".perfetto-state"), input = root.querySelector("input[type=file]");
    const name = root.dataset.name;
    function post(win, buffer) {
      const timer = setInterval(() => win.postMessage("PING", PERFETTO), 50);
      const answer = ev => {
        if (ev.source !== win || ev.data !== "PONG") return;
        clearInterval(timer);
        window.removeEventListener("message", answer);
        win.postMessage({perfetto: {buffer: buffer, title: name, fileName: name}}, PERFETTO);
        state.textContent = "sent to Perfetto";
      };
      window.addEventListener("message", answer);
    }
    root.querySelector(".open-perfetto").addEventListener("click", async () => {
      const win = window.open(PERFETTO);
      if (!win) { state.textContent = "the browser blocked the Perfetto window"; return; }
      try {
        const picked = input.files && input.files[0];
        const buffer = picked ? await picked.arrayBuffer() : await fetch(root.dataset.href).then(r => {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.arrayBuffer();
        });
        post(win, buffer);
      } catch (err) {
        win.close();
        state.textContent = "this page cannot read " + root.dataset.href + " (" + err.message + "; a page opened " +
          "from disk may not read files beside it): pick the file, then click again";
      }
    });
    input.addEventListener("change", () => {
      state.textContent = input.files.length ? "picked: click Open trace in Perfetto" : "";
    });
  }

  document.querySelectorAll("p.perfetto").forEach(Perfetto);
})();
