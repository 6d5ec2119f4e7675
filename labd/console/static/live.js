// The console's only script: moves progress bars and states as the daemon's events arrive
// (server-sent events from /console/live). Without it every page still reads right; a reload
// shows the same figures.
"use strict";
(function () {
  const status = document.getElementById("live-status");
  // The stream first says where this page's jobs stand now, then what happens to them.
  const shown = [...new Set([...document.querySelectorAll("[data-job]")].map((e) => e.dataset.job))];
  const query = shown.slice(0, 100).map((id) => "job=" + encodeURIComponent(id)).join("&");
  const source = new EventSource("/console/live" + (query ? "?" + query : ""));
  const rows = (job) => document.querySelectorAll('[data-job="' + CSS.escape(job) + '"]');
  let reloading = false;
  function reloadSoon() {
    if (!reloading) { reloading = true; setTimeout(() => location.reload(), 500); }
  }
  source.addEventListener("open", () => { if (status) status.textContent = "Live: following the lab."; });
  source.addEventListener("error", () => { if (status) status.textContent = "Live: reconnecting…"; });
  // The session ended, or this principal opened newer live pages: stop, do not reconnect.
  source.addEventListener("ended", () => {
    source.close();
    if (status) status.textContent = "Live: stopped (signed out, or newer live pages open); reload to follow.";
  });
  source.addEventListener("iteration", (e) => {
    const d = JSON.parse(e.data);
    rows(d.job).forEach((row) => {
      const bar = row.querySelector("progress");
      if (!bar) return;
      bar.value = Math.max(bar.value, d.done);
      const count = row.querySelector(".count");
      if (count) count.textContent = String(bar.value);
    });
  });
  source.addEventListener("started", (e) => {
    const d = JSON.parse(e.data);
    if (rows(d.job).length === 0 && document.querySelector("table.live")) reloadSoon();
    rows(d.job).forEach((row) => { const bar = row.querySelector("progress"); if (bar) bar.max = d.total; });
  });
  source.addEventListener("leased", (e) => {
    const d = JSON.parse(e.data);
    if (rows(d.job).length === 0 && document.querySelector("table.live")) reloadSoon();
  });
  source.addEventListener("finished", (e) => {
    const d = JSON.parse(e.data);
    rows(d.job).forEach((row) => {
      const cell = row.querySelector(".state");
      if (cell) { cell.textContent = d.state; cell.className = "state " + d.state; }
      const bar = row.querySelector("progress");
      if (bar && d.state === "succeeded") { bar.value = bar.max; }
    });
    const facts = document.querySelector("table.facts");
    if (facts && facts.dataset.job === d.job && facts.dataset.state !== d.state) reloadSoon();
  });
})();
