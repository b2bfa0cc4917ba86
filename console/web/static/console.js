// agentgw console: confirmations and live task progress. Everything the
// server sends is put into the page as text (textContent), never markup.
"use strict";
document.addEventListener("submit", function (e) {
  var msg = e.target.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) { e.preventDefault(); }
});
(function () {
  var box = document.getElementById("task");
  if (!box || box.getAttribute("data-terminal") === "true") { return; }
  var id = box.getAttribute("data-task");
  var shown = -1;
  function text(elId, v) { var el = document.getElementById(elId); if (el) { el.textContent = v == null ? "" : String(v); } }
  function render(t) {
    var st = document.getElementById("state");
    st.textContent = t.State; st.className = "badge " + t.State;
    text("revision", t.Revision); text("updated", t.Updated); text("failure", t.Failure || ""); text("result", t.Result || "");
    var inp = document.getElementById("input");
    if (t.Input) {
      if (document.getElementById("input-id").value !== t.Input.RequestID) {
        document.getElementById("input-id").value = t.Input.RequestID;
      }
      text("input-request", t.Input.Request); inp.hidden = false;
    } else { inp.hidden = true; }
    document.getElementById("cancel").hidden = t.Terminal;
    var body = document.querySelector("#events tbody");
    if (t.Revision !== shown) {
      body.textContent = "";
      (t.Events || []).forEach(function (ev) {
        var tr = document.createElement("tr");
        [ev.Revision, ev.Type, ev.At].forEach(function (v) { var td = document.createElement("td"); td.textContent = String(v); tr.appendChild(td); });
        var td = document.createElement("td"), code = document.createElement("code");
        code.textContent = ev.Detail; td.appendChild(code); tr.appendChild(td); body.appendChild(tr);
      });
      shown = t.Revision;
    }
    box.setAttribute("data-terminal", String(t.Terminal));
    return t.Terminal;
  }
  // Live: the server sends the task at each new revision (Server-Sent
  // Events) and "end" once it is settled. Polling is the fallback only, for
  // a browser without EventSource or a stream the server refused.
  function poll() {
    fetch("/tasks/" + encodeURIComponent(id) + "/state", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (t) { if (!render(t)) { setTimeout(poll, 700); } })
      .catch(function () { setTimeout(poll, 3000); });
  }
  if (!window.EventSource) { setTimeout(poll, 300); return; }
  var ended = false;
  function follow() {
    var es = new EventSource("/tasks/" + encodeURIComponent(id) + "/live");
    box.setAttribute("data-live", "open");
    es.addEventListener("task", function (m) {
      var t; try { t = JSON.parse(m.data); } catch (e) { return; }
      if (render(t)) { ended = true; }
    });
    es.addEventListener("end", function () { ended = true; es.close(); box.setAttribute("data-live", "ended"); });
    es.onerror = function () {
      if (ended) { es.close(); return; }
      // The browser retries a dropped stream by itself; a refused one
      // (too many open, logged out) is closed: poll instead.
      if (es.readyState === EventSource.CLOSED) { box.setAttribute("data-live", "polling"); setTimeout(poll, 1000); }
    };
  }
  follow();
})();
