// Loaded after require.js and before the widget bundle (embed-amd.js) on pages with
// widgets; it adapts the bundle to this site.

// 1. The bundle finds its own files (the icon font) relative to the URL requirejs
//    gives each module: <baseUrl>/@jupyter-widgets/... . By default baseUrl is the
//    page's folder; point it at _static/widget-assets/, where
//    scripts/vendor_widget_js.sh puts those files.
(function () {
  var here = document.currentScript.src; // .../_static/widget-setup.js
  require.config({ baseUrl: here.substring(0, here.lastIndexOf("/") + 1) + "widget-assets/" });
})();

// 2. Widgets typeset LaTeX in their labels with MathJax 2's MathJax.Hub.Queue; the
//    book loads MathJax 3, which has typesetPromise instead. MathJax 3 replaces the
//    global MathJax object when it starts (a deferred script, so before
//    DOMContentLoaded), and widgets render on "load", after it: add the old entry
//    point in between.
document.addEventListener("DOMContentLoaded", function () {
  var mathjax = window.MathJax;
  if (mathjax && !mathjax.Hub) {
    mathjax.Hub = {
      Queue: function (job) {
        var element = job[2];
        if (element && mathjax.typesetPromise) mathjax.typesetPromise([element]);
      },
    };
  }
});

// 3. A widget in the book is a static copy drawn from its stored state: no kernel runs
//    behind it, so its buttons and sliders do nothing here. Say so under each one.
document.addEventListener("DOMContentLoaded", function () {
  var views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
  views.forEach(function (view) {
    var note = document.createElement("p");
    note.className = "teachgrad-static-note";
    note.style.fontSize = "0.8em";
    note.style.color = "#666";
    note.textContent = "A static copy of the widget: its buttons and sliders work when you " +
      "run this chapter in JupyterLab (make lab).";
    view.parentNode.insertBefore(note, view.nextSibling);
  });
});
