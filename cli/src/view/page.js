(function () {
  var details = document.getElementById("details");
  var selected = null;
  function show(mark) {
    if (selected) { selected.classList.remove("selected"); }
    selected = mark;
    mark.classList.add("selected");
    var text = mark.getAttribute("data-json") || "";
    try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* shown as it is */ }
    details.textContent = mark.getAttribute("title") + "\n\n" + text;
  }
  document.addEventListener("click", function (ev) {
    var mark = ev.target.closest(".mark");
    if (mark) { show(mark); }
  });
  // `page.html#seq=15` opens with the event at seq 15 shown (a link to one event).
  var wanted = /^#seq=(\d+)$/.exec(window.location.hash);
  if (wanted) {
    var marks = document.querySelectorAll(".mark.tick[data-seq='" + wanted[1] + "'], .mark[data-seq='" + wanted[1] + "']");
    if (marks.length > 0) { show(marks[0]); }
  }
})();
