// vibesys ui: live updates by server-sent events. Everything else works without this script.
// "html" events replace parts of the page with fragments the server rendered (escaped there);
// "log" events append a stream's new bytes as text (never as markup); "reset" starts the logs
// of a new attempt; "end" says nothing more will change.
(function () {
  "use strict";
  var url = document.body.getAttribute("data-events");
  var live = document.getElementById("live");
  if (!url || !window.EventSource) {
    return;
  }
  var source = new EventSource(url);

  function mark(text, on) {
    if (live) {
      live.textContent = text;
      live.classList.toggle("on", on);
    }
  }

  function atBottom(element) {
    return element.scrollHeight - element.scrollTop - element.clientHeight < 24;
  }

  source.addEventListener("open", function () {
    mark("live", true);
  });
  source.addEventListener("error", function () {
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
  });
  source.addEventListener("log", function (event) {
    var chunk = JSON.parse(event.data);
    var pre = document.getElementById("log-" + chunk.stream);
    if (!pre || String(chunk.start) !== pre.getAttribute("data-end")) {
      return; // not the bytes that follow what is shown
    }
    var follow = atBottom(pre);
    pre.appendChild(document.createTextNode(chunk.text));
    pre.setAttribute("data-end", String(chunk.end));
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
      }
    });
  });
  source.addEventListener("end", function () {
    source.close();
    mark("finished", false);
  });
})();
