// Draws each chart of the page: a canvas names the JSON data block that holds its Chart.js
// configuration (built by fairqueue/dashboard/charts.py), so the page has no inline script.
"use strict";
document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
  var block = document.getElementById(canvas.getAttribute("data-chart"));
  if (block === null) {
    return;
  }
  new Chart(canvas, JSON.parse(block.textContent));
});
