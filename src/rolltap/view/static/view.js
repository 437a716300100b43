// rolltap view: the Runs page refreshes its rows every 2 s while a run is in progress.
// No framework: it fetches the page's JSON and sets each cell's text.
(function () {
  "use strict";
  var table = document.getElementById("runs");
  if (!table) { return; }
  var url = table.getAttribute("data-live");
  var columns = ["rollouts", "statuses", "interrupted", "reward", "pass", "tokens", "duration"];

  function update(runs) {
    var shown = table.querySelectorAll("tbody tr[data-run]");
    var ids = runs.map(function (r) { return r.id; });
    if (shown.length !== ids.length ||
        Array.prototype.some.call(shown, function (tr, i) { return tr.getAttribute("data-run") !== ids[i]; })) {
      window.location.reload();  // runs were added or removed: show the new page whole
      return;
    }
    runs.forEach(function (run, i) {
      var tr = shown[i];
      columns.forEach(function (col) {
        var td = tr.querySelector('td[data-col="' + col + '"]');
        if (td && td.textContent !== run[col]) { td.textContent = run[col]; }
      });
      tr.className = run.live ? "live" : "";
    });
    table.setAttribute("data-updated", String(Date.now()));
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (resp) { return resp.ok ? resp.json() : null; })
      .then(function (body) { if (body) { update(body.runs); } })
      .catch(function () { /* the viewer restarted or the network blinked: try again */ })
      .then(function () { window.setTimeout(poll, 2000); });
  }
  window.setTimeout(poll, 2000);
})();
