(function () {
  var details = document.getElementById("details");
  var selected = null;
  // The characters the terminal output escapes (controls, line separators, bidirectional
  // controls) shown as the same visible \u{HEX}: a stored id never reads reversed. Newlines stay.
  var hidden = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
  function visible(text) {
    return text.replace(hidden, function (c) { return "\\u{" + c.charCodeAt(0).toString(16) + "}"; });
  }
  function show(mark) {
    if (selected) { selected.classList.remove("selected"); }
    selected = mark;
    mark.classList.add("selected");
    var text = mark.getAttribute("data-json") || "";
    try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* shown as it is */ }
    details.textContent = mark.getAttribute("title") + "\n\n" + visible(text);
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
