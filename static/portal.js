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
