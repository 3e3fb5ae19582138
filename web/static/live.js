// Live pages: while this page is visible, ask the server for the store's commit every second;
// when it is not the one the page was made from, fetch the page again and swap its <main>.
(function () {
  "use strict";
  if (!window.fetch || !window.DOMParser) return;
  var busy = false;
  function get(url, accept) {
    return fetch(url, { credentials: "same-origin", cache: "no-store", headers: { Accept: accept } })
      .then(function (response) { if (!response.ok) throw new Error(response.status); return response; });
  }
  function check() {
    var main = document.getElementById("page");
    if (busy || !main || document.visibilityState === "hidden") return;
    busy = true;
    get("/head", "application/json")
      .then(function (response) { return response.json(); })
      .then(function (now) {
        if (now.head === main.dataset.head) return null;
        return get(window.location.href, "text/html")
          .then(function (response) { return response.text(); })
          .then(function (text) {
            var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("page");
            if (fresh) main.replaceWith(document.adoptNode(fresh));
          });
      })
      .catch(function () {})
      .finally(function () { busy = false; });
  }
  window.setInterval(check, 1000);
})();
