// Partita portal: live updates and the submit form's preview. No
// framework: fetch() of server-rendered HTML fragments, same origin, with
// the session cookie; nothing here is needed for the pages to work.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Live regions: <div data-refresh="/fragments/x" data-every="5000">.
  // A region the user is working in (focus inside) is left alone.
  function live(el) {
    var every = parseInt(el.getAttribute("data-every"), 10) || 5000;
    var status = document.querySelector("[data-live-status]");
    var busy = false;
    function tick() {
      if (busy || document.hidden || el.contains(document.activeElement)) return;
      busy = true;
      fetch(el.getAttribute("data-refresh"), { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (r.status === 401) { window.location.reload(); return null; }
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text();
        })
        .then(function (html) {
          if (html === null) return;
          if (!el.contains(document.activeElement)) el.innerHTML = html;
          el.setAttribute("data-updated", String(Date.now()));
          if (status) { status.classList.remove("stale"); status.textContent = "live · " + new Date().toLocaleTimeString(); }
        })
        .catch(function () { if (status) { status.classList.add("stale"); status.textContent = "offline"; } })
        .then(function () { busy = false; });
    }
    setInterval(tick, every);
  }
  document.querySelectorAll("[data-refresh]").forEach(live);

  // Selects that submit their form on change (the admin's team picker).
  document.querySelectorAll("select[data-autosubmit]").forEach(function (s) {
    s.addEventListener("change", function () { s.form.submit(); });
  });

  // The submit form: show the inputs of the chosen GPU mode and kind, and
  // ask the server what Partita would choose as the user types.
  var form = document.getElementById("submit-form");
  if (!form) return;
  var preview = document.getElementById("preview");
  function sync() {
    var mode = form.querySelector("input[name=gpu_mode]:checked");
    form.querySelectorAll(".mode").forEach(function (m) {
      m.classList.toggle("on", !!mode && m.getAttribute("data-mode") === mode.value);
    });
    var kind = form.querySelector("input[name=kind]:checked");
    form.classList.toggle("kind-training", !!kind && kind.value === "training");
    form.classList.toggle("kind-inference", !kind || kind.value !== "training");
  }
  var timer = null, seq = 0;
  function ask() {
    var data = new FormData(form);
    data.delete("csrf");
    data.delete("idempotency_key");
    var mine = ++seq;
    fetch("/submit/preview?" + new URLSearchParams(data).toString(), { credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null || mine !== seq) return;
        preview.innerHTML = html;
        form.querySelectorAll("[aria-invalid]").forEach(function (i) { i.removeAttribute("aria-invalid"); });
        preview.querySelectorAll("[data-field]").forEach(function (li) {
          var input = form.querySelector("[name='" + li.getAttribute("data-field") + "']");
          if (input) input.setAttribute("aria-invalid", "true");
        });
        preview.setAttribute("data-seq", String(mine));
      })
      .catch(function () {});
  }
  function changed() {
    sync();
    clearTimeout(timer);
    timer = setTimeout(ask, 250);
  }
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  sync();
  form.querySelectorAll(".ferr[data-for]").forEach(function (p) {
    var input = form.querySelector("[name='" + p.getAttribute("data-for") + "']");
    if (input) input.setAttribute("aria-invalid", "true");
  });
})();
