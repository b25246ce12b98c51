// Refreshes the page's live part in place every data-refresh seconds, so a
// token being typed and the open history panels stay as they are. Without
// JavaScript the page's <noscript> refresh reloads it instead.
(function () {
  "use strict";
  var every = Number(document.body.getAttribute("data-refresh"));
  if (!every || !window.fetch || !window.DOMParser) return;
  // The notice of a button is shown once: later refreshes load the page itself.
  var url = location.pathname, refreshed = 0;
  if (location.search) history.replaceState(null, "", url);
  function tick() {
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var next = doc.getElementById("live"), live = document.getElementById("live");
        if (!next || !live) return;
        var open = {};
        live.querySelectorAll("details[open]").forEach(function (d) { open[d.getAttribute("data-job")] = true; });
        next.querySelectorAll("details").forEach(function (d) { if (open[d.getAttribute("data-job")]) d.open = true; });
        live.replaceWith(document.adoptNode(next));
        var upd = doc.getElementById("updated");
        if (upd) document.getElementById("updated").textContent = upd.textContent;
        document.body.classList.remove("stale");
        document.body.setAttribute("data-refreshed", String(++refreshed));
      })
      .catch(function (e) {
        document.body.classList.add("stale");
        document.getElementById("updated").textContent = "cannot reach the agent (" + e.message + "); retrying";
      })
      .finally(function () { setTimeout(tick, every * 1000); });
  }
  setTimeout(tick, every * 1000);
})();
