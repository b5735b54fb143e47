(function () {
  var details = document.getElementById("details");
  var selected = null;
  document.addEventListener("click", function (ev) {
    var mark = ev.target.closest(".mark");
    if (!mark) { return; }
    if (selected) { selected.classList.remove("selected"); }
    selected = mark;
    mark.classList.add("selected");
    var text = mark.getAttribute("data-json") || "";
    try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* shown as it is */ }
    details.textContent = mark.getAttribute("title") + "\n\n" + text;
  });
})();
