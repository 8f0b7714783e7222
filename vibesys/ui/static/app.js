// vibesys ui: live updates by server-sent events. Everything else works without this script.
// "html" events replace parts of the page with fragments the server rendered (escaped there);
// "log" events append a stream's new bytes as text (never as markup); "reset" starts the logs
// of a new attempt; "end" says nothing more will change. Durations still going (class "tick",
// their milliseconds at render in data-ms) count on by this page's clock.
(function () {
  "use strict";

  function span(ms) {
    // pages.span: at most two units
    if (ms < 1000) {
      return Math.max(ms, 0).toFixed(0) + "ms";
    }
    var s = Math.floor(ms / 1000);
    function two(n) {
      return (n < 10 ? "0" : "") + n;
    }
    if (s < 60) {
      return s + "s";
    }
    if (s < 3600) {
      return Math.floor(s / 60) + "m " + two(s % 60) + "s";
    }
    if (s < 86400) {
      return Math.floor(s / 3600) + "h " + two(Math.floor((s % 3600) / 60)) + "m";
    }
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function tick() {
    var now = Date.now();
    Array.prototype.forEach.call(document.querySelectorAll(".tick[data-ms]"), function (el) {
      if (!el.hasAttribute("data-seen")) {
        el.setAttribute("data-seen", String(now)); // rendered just now, by the server
      }
      var ms = Number(el.getAttribute("data-ms")) + now - Number(el.getAttribute("data-seen"));
      el.textContent = span(ms);
    });
  }
  tick();
  window.setInterval(tick, 1000);

  var url = document.body.getAttribute("data-events");
  var live = document.getElementById("live");
  if (!url || !window.EventSource) {
    return;
  }
  var source = new EventSource(url);
  var open = false;

  function mark(text, on) {
    if (live) {
      var driver = document.getElementById("driver");
      var undriven = on && driver && driver.getAttribute("data-driven") === "no";
      live.textContent = undriven ? "not driven" : text;
      live.classList.toggle("on", on && !undriven);
      live.classList.toggle("stale", Boolean(undriven));
    }
  }

  function atBottom(element) {
    return element.scrollHeight - element.scrollTop - element.clientHeight < 24;
  }

  function note(stream, text) {
    var element = document.getElementById("log-note-" + stream);
    if (element) {
      element.textContent = text;
    }
  }

  function bound(pre) {
    // At most what a page load shows: its end, from a line's start.
    var most = Number(pre.getAttribute("data-bound")) || 65536;
    var text = pre.textContent;
    if (text.length <= most) {
      return false;
    }
    text = text.slice(text.length - most);
    var newline = text.indexOf("\n");
    if (newline >= 0 && newline < 4096) {
      text = text.slice(newline + 1);
    }
    pre.textContent = text;
    return true;
  }

  source.addEventListener("open", function () {
    open = true;
    mark("live", true);
  });
  source.addEventListener("error", function () {
    open = false;
    mark(source.readyState === EventSource.CLOSED ? "not live" : "reconnecting", false);
  });
  source.addEventListener("html", function (event) {
    var parts = JSON.parse(event.data);
    Object.keys(parts).forEach(function (id) {
      var element = document.getElementById(id);
      if (element) {
        element.innerHTML = parts[id];
      }
    });
    tick();
    if (open) {
      mark("live", true);
    }
  });
  source.addEventListener("log", function (event) {
    var chunk = JSON.parse(event.data);
    var pre = document.getElementById("log-" + chunk.stream);
    if (!pre) {
      return;
    }
    var follow = atBottom(pre);
    var cut = false;
    if (chunk.skipped > 0 && chunk.start > Number(pre.getAttribute("data-end"))) {
      pre.textContent = chunk.text; // too far behind: the tail, as a page load shows it
      cut = true;
    } else if (String(chunk.start) !== pre.getAttribute("data-end")) {
      return; // not the bytes that follow what is shown
    } else {
      pre.appendChild(document.createTextNode(chunk.text));
      cut = bound(pre);
    }
    pre.setAttribute("data-end", String(chunk.end));
    var behind = chunk.size - chunk.end;
    var parts = [];
    if (cut || pre.getAttribute("data-cut")) {
      pre.setAttribute("data-cut", "1");
      parts.push("only the end is shown (" + chunk.end.toLocaleString() + " bytes so far: see the whole file)");
    }
    if (behind > 0) {
      parts.push("behind by " + behind.toLocaleString() + " bytes");
    }
    note(chunk.stream, parts.join("; "));
    if (follow) {
      pre.scrollTop = pre.scrollHeight;
    }
  });
  source.addEventListener("reset", function (event) {
    var reset = JSON.parse(event.data);
    var label = document.getElementById("log-attempt");
    if (label) {
      label.textContent = String(reset.attempt);
    }
    ["stdout", "stderr"].forEach(function (stream) {
      var pre = document.getElementById("log-" + stream);
      if (pre) {
        pre.textContent = "";
        pre.setAttribute("data-end", "0");
        pre.removeAttribute("data-cut");
        note(stream, "");
      }
    });
  });
  source.addEventListener("end", function () {
    source.close();
    open = false;
    mark("finished", false);
  });
})();
