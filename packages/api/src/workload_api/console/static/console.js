// Workload console: keeps pages live. Hand-written, no library, no inline script (the CSP
// allows only this file). A run's page follows the run's event stream (and re-reads its live
// part at most once a second, never the whole page); the runs list re-reads
// its counts and rows all the time (often while some run is unfinished, less often when none
// is), a draft's page its state while it is generating. A refresh keeps the keyboard focus.
"use strict";

(function () {

  var REFRESH_DELAY = 250;
  var REFRESH_GAP = 1000;

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    row.appendChild(td);
  }

  function when(value) {
    return value ? value.replace("T", " ").replace("Z", "").slice(0, 23) + " UTC" : "—";
  }

  // What names the focused element inside target so that its equivalent can be found again
  // in fresh HTML: its id, its <details>' id (a summary), or its link's href and which of the
  // links with that href it is. Null when the focus is elsewhere.
  function focusKey(target) {
    var el = document.activeElement;
    if (!el || el === document.body || !target.contains(el)) { return null; }
    if (el.id) { return { id: el.id }; }
    if (el.tagName === "SUMMARY" && el.parentElement && el.parentElement.id) {
      return { summaryOf: el.parentElement.id };
    }
    var href = el.getAttribute("href");
    if (href !== null) { return { href: href, index: sameLinks(target, href).indexOf(el) }; }
    return null;
  }

  function sameLinks(target, href) {
    return Array.prototype.filter.call(target.querySelectorAll("a[href]"), function (a) {
      return a.getAttribute("href") === href;
    });
  }

  function refocus(target, key) {
    var el = null;
    if (key.id) {
      el = document.getElementById(key.id);
    } else if (key.summaryOf) {
      var details = document.getElementById(key.summaryOf);
      el = details ? details.querySelector("summary") : null;
    } else {
      el = sameLinks(target, key.href)[Math.max(key.index, 0)] || null;
    }
    if (el && target.contains(el)) { el.focus({ preventScroll: true }); }
  }

  // Replace an element's content with fresh server HTML, keeping open <details> open and the
  // keyboard focus on the equivalent element (a refresh must not throw it back to <body>).
  function swap(target, html) {
    var open = {};
    var focused = focusKey(target);
    target.querySelectorAll("details[open][id]").forEach(function (d) { open[d.id] = true; });
    target.innerHTML = html;
    target.querySelectorAll("details[id]").forEach(function (d) { if (open[d.id]) { d.open = true; } });
    if (focused) { refocus(target, focused); }
  }

  function signedOut(response) {
    return response.redirected && response.url.indexOf("/ui/login") !== -1;
  }

  function followRun(live) {
    var runId = live.dataset.runId;
    var after = Number(live.dataset.after || "0");
    var log = document.querySelector("#event-log tbody");
    // The log keeps as many of the latest rows as the page starts with; the history page has all.
    var keep = Number(document.getElementById("event-log").dataset.keep || "100");
    var cancelForm = document.getElementById("cancel-form");
    var refreshing = false;
    var again = false;
    var timer = null;
    var lastStart = 0;
    var lastHtml = null;

    // The live part is re-read at most once a second, a quarter of a second after the event
    // that asks for it: a burst of events (a run of many tasks) costs one or two reads, not one
    // each. Unchanged HTML is not swapped in.
    function schedule() {
      if (refreshing) { again = true; return; }
      if (timer !== null) { return; }
      var wait = Math.max(REFRESH_DELAY, lastStart + REFRESH_GAP - Date.now());
      timer = window.setTimeout(function () { timer = null; refresh(); }, wait);
    }

    function refresh() {
      refreshing = true;
      lastStart = Date.now();
      fetch(live.dataset.liveUrl, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (signedOut(response)) { window.location.reload(); return null; }
          return response.ok ? response.text() : null;
        })
        .then(function (html) {
          if (html !== null && html !== lastHtml) { lastHtml = html; swap(live, html); }
        })
        .catch(function () { again = true; })
        .finally(function () {
          refreshing = false;
          if (again) { again = false; schedule(); }
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
      while (log.rows.length > keep) {
        log.deleteRow(0);
        document.getElementById("events-trimmed").hidden = false;
      }
    }

    var source = new EventSource("/api/v1/runs/" + encodeURIComponent(runId) +
      "/events/stream?after=" + after);
    source.onmessage = function (message) {
      append(JSON.parse(message.data));
      schedule();
    };
    source.addEventListener("end", function () {
      source.close();
      live.dataset.terminal = "true";
      if (cancelForm) { cancelForm.hidden = true; }
      schedule();
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
