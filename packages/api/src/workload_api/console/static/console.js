// Workload console: keeps pages live. Hand-written, no library, no inline script (the CSP
// allows only this file). A run's page follows the run's event stream; the runs list re-reads
// its counts and rows all the time (often while some run is unfinished, less often when none
// is), a draft's page its state while it is generating.
"use strict";

(function () {
  var MAX_EVENT_ROWS = 300; // the log keeps the latest rows; the history page has all of them

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    row.appendChild(td);
  }

  function when(value) {
    return value ? value.replace("T", " ").replace("Z", "").slice(0, 23) + " UTC" : "—";
  }

  // Replace an element's content with fresh server HTML, keeping open <details> open.
  function swap(target, html) {
    var open = {};
    target.querySelectorAll("details[open][id]").forEach(function (d) { open[d.id] = true; });
    target.innerHTML = html;
    target.querySelectorAll("details[id]").forEach(function (d) { if (open[d.id]) { d.open = true; } });
  }

  function signedOut(response) {
    return response.redirected && response.url.indexOf("/ui/login") !== -1;
  }

  function followRun(live) {
    var runId = live.dataset.runId;
    var after = Number(live.dataset.after || "0");
    var log = document.querySelector("#event-log tbody");
    var cancelForm = document.getElementById("cancel-form");
    var refreshing = false;
    var again = false;

    function refresh() {
      if (refreshing) { again = true; return; }
      refreshing = true;
      fetch(live.dataset.liveUrl, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (signedOut(response)) { window.location.reload(); return null; }
          return response.ok ? response.text() : null;
        })
        .then(function (html) { if (html !== null) { swap(live, html); } })
        .catch(function () { again = true; })
        .finally(function () {
          refreshing = false;
          if (again) { again = false; window.setTimeout(refresh, 150); }
        });
    }

    function append(event) {
      if (event.sequence <= after) { return; }
      after = event.sequence;
      var row = document.createElement("tr");
      row.dataset.sequence = String(event.sequence);
      cell(row, event.sequence);
      cell(row, when(event.occurred_at));
      cell(row, event.type);
      cell(row, event.task_key);
      cell(row, event.attempt);
      log.appendChild(row);
      while (log.rows.length > MAX_EVENT_ROWS) {
        log.deleteRow(0);
        document.getElementById("events-trimmed").hidden = false;
      }
    }

    var source = new EventSource("/api/v1/runs/" + encodeURIComponent(runId) +
      "/events/stream?after=" + after);
    source.onmessage = function (message) {
      append(JSON.parse(message.data));
      refresh();
    };
    source.addEventListener("end", function () {
      source.close();
      live.dataset.terminal = "true";
      if (cancelForm) { cancelForm.hidden = true; }
      refresh();
    });
  }

  // A live fragment (the runs list, a generating draft): re-read from data-url every
  // data-every ms (when the tab is visible) while its flag ([data-live-flag]) says active. One
  // marked data-always (the runs list: new runs may start at any time) keeps polling when
  // nothing on it is active, every data-idle-every ms; unchanged HTML is not swapped in.
  function poll(holder) {
    var every = Number(holder.dataset.every || "3000");
    var idle = Number(holder.dataset.idleEvery || String(every));
    var always = holder.dataset.always === "true";
    var last = null;
    function schedule() {
      window.setTimeout(tick, holder.dataset.active === "true" ? every : idle);
    }
    function tick() {
      if (holder.dataset.active !== "true" && !always) { return; }
      if (document.hidden) { schedule(); return; }
      fetch(holder.dataset.url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (signedOut(response)) { window.location.reload(); return null; }
          return response.ok ? response.text() : null;
        })
        .then(function (html) {
          if (html === null || html === last) { return; }
          last = html;
          swap(holder, html);
          var flag = holder.querySelector("[data-live-flag]");
          holder.dataset.active = flag ? flag.dataset.active : "false";
        })
        .catch(function () { /* try again at the next tick */ })
        .finally(schedule);
    }
    schedule();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var live = document.getElementById("live");
    if (live && live.dataset.terminal !== "true") { followRun(live); }
    document.querySelectorAll("[data-url][data-active=true], [data-url][data-always=true]")
      .forEach(poll);
  });
})();
