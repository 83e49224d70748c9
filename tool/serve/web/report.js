// Draws the charts of the HTML reports (serve/page.h describes a chart) with uPlot; inlined into each report.
"use strict";
function kevoTokens(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return +(v / 1e6).toFixed(2) + "M";
  if (a >= 1e3) return +(v / 1e3).toFixed(2) + "k";
  return String(Math.round(v));
}
const kevoIntIncrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5,
  1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10];
function kevoXAxis(spec) {
  const ax = { label: spec.xlabel || "", incrs: kevoIntIncrs };
  if (spec.x === "tokens") ax.values = (u, splits) => splits.map(kevoTokens);
  else if (spec.x === "category") { ax.incrs = [1]; ax.values = (u, splits) => splits.map((v) => spec.categories[v] ?? ""); }
  else ax.values = (u, splits) => splits.map((v) => String(Math.round(v)));
  return ax;
}
function kevoYAxis(spec) {
  const ax = { label: spec.ylabel || "", size: 60 };
  if (spec.yint) { ax.incrs = kevoIntIncrs; ax.values = (u, splits) => splits.map((v) => String(Math.round(v))); }
  else if (spec.ylog) ax.values = (u, splits) => splits.map((v) => (v >= 1 ? v.toFixed(0) : +v.toPrecision(2)) + "x");
  else ax.values = (u, splits) => splits.map((v) => +v.toFixed(2) + "x");
  return ax;
}
function kevoSeries(s) {
  const out = { label: s.label, stroke: s.color, fill: s.kind === "bars" ? s.color : undefined, width: 2, spanGaps: true };
  if (s.kind === "step") { out.paths = uPlot.paths.stepped({ align: 1 }); out.points = { show: false }; }
  else if (s.kind === "bars") { out.paths = uPlot.paths.bars({ size: [0.7, 60] }); out.points = { show: false }; }
  else { out.paths = () => null; out.points = { show: true, size: 7, fill: s.color, stroke: s.color }; }
  return out;
}
// The reference line (y = 1) and vertical marks, drawn over the plot area.
function kevoMarks(spec) {
  return (u) => {
    const ctx = u.ctx, b = u.bbox;
    ctx.save();
    ctx.lineWidth = 1 * devicePixelRatio;
    ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
    if (spec.ref !== undefined) {
      const y = u.valToPos(spec.ref, "y", true);
      if (y >= b.top && y <= b.top + b.height) {
        ctx.strokeStyle = "#999"; ctx.beginPath(); ctx.moveTo(b.left, y); ctx.lineTo(b.left + b.width, y); ctx.stroke();
      }
    }
    ctx.strokeStyle = "#6a6";
    for (const v of spec.vlines || []) {
      const x = u.valToPos(v, "x", true);
      ctx.beginPath(); ctx.moveTo(x, b.top); ctx.lineTo(x, b.top + b.height); ctx.stroke();
    }
    ctx.restore();
    // The tick labels as drawn (the canvas has no text): for screen readers' titles and the tests.
    u.root.dataset.xticks = (u.axes[0]._values || []).join("|");
    u.root.dataset.yticks = (u.axes[1]._values || []).join("|");
  };
}
function kevoDrawCharts(specs) {
  for (const spec of specs) {
    const box = document.querySelector("#" + spec.id + " .plot");
    const data = [spec.xs].concat(spec.series.map((s) => s.data));
    const xScale = { time: false };
    if (spec.x === "category") xScale.range = [-0.5, spec.categories.length - 0.5];
    else if (spec.xs.length === 1) xScale.range = [spec.xs[0] - 1, spec.xs[0] + 1];
    const yScale = spec.ylog ? { distr: 3, log: 2 } : { range: (u, lo, hi) => [0, Math.max(hi * 1.1, spec.ref !== undefined ? 1.1 : 1)] };
    new uPlot({
      width: 760, height: 300,
      scales: { x: xScale, y: yScale },
      axes: [kevoXAxis(spec), kevoYAxis(spec)],
      series: [{ label: spec.xlabel || "x", value: (u, v) => v == null ? "" : spec.x === "tokens" ? kevoTokens(v) : spec.x === "category" ? (spec.categories[v] ?? "") : String(Math.round(v)) }]
        .concat(spec.series.map(kevoSeries)),
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      hooks: { draw: [kevoMarks(spec)] },
    }, data, box);
  }
}
