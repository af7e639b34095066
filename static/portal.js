// Partita portal: the little the pages need beyond htmx. Nothing here is
// needed for the pages to work: every form posts without JavaScript.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Selects that submit their form on change (pickers).
  document.querySelectorAll("select[data-autosubmit]").forEach(function (s) {
    s.addEventListener("change", function () { s.form.requestSubmit(); });
  });

  // A live region that htmx refreshes says when it last did, or that it
  // could not (the server is away).
  document.body.addEventListener("htmx:afterSwap", function (e) {
    var status = document.querySelector("[data-live-status]");
    if (status && e.detail.target.hasAttribute("data-live")) {
      status.classList.remove("stale");
      status.textContent = "live · " + new Date().toLocaleTimeString();
    }
  });
  document.body.addEventListener("htmx:sendError", function () {
    var status = document.querySelector("[data-live-status]");
    if (status) { status.classList.add("stale"); status.textContent = "offline"; }
  });
})();

// Live regions (data-live, refreshed by htmx every few seconds): leave
// alone a region the user is working in (focus inside), and do not ask
// while the page is hidden.
(function () {
  "use strict";
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    var el = e.detail.elt;
    if (!el || !el.hasAttribute || !el.hasAttribute("data-live")) return;
    var active = document.activeElement;
    if (document.hidden || (active && active !== document.body && el.contains(active))) {
      e.preventDefault();
    }
  });
})();

// The submit form: show the inputs of the chosen GPU mode and the
// words of the chosen kind (without JavaScript every input shows).
(function () {
  "use strict";
  var form = document.getElementById("submit-form");
  if (!form) return;
  function sync() {
    var mode = form.querySelector("input[name=gpu_mode]:checked");
    form.querySelectorAll(".mode").forEach(function (m) {
      m.classList.toggle("on", !!mode && m.getAttribute("data-mode") === mode.value);
    });
    var kind = form.querySelector("input[name=kind]:checked");
    form.classList.toggle("kind-training", !!kind && kind.value === "training");
    form.classList.toggle("kind-inference", !kind || kind.value !== "training");
  }
  form.addEventListener("change", sync);
  sync();
})();
