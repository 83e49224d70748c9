// The KernelEvo server page: polls /api/overview every 2 s; the chart is uPlot (vendored).
"use strict";
const token = new URLSearchParams(location.search).get("token");
const api = (path) => fetch(path + (token ? (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : ""))
  .then((r) => r.ok ? r.json() : r.json().then((e) => Promise.reject(e.error || r.statusText)));
const $ = (sel) => document.querySelector(sel);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmt = (v, d = 3) => (typeof v === "number" ? v.toFixed(d) : "");
const age = (s) => s < 60 ? Math.round(s) + " s ago" : Math.round(s / 60) + " min ago";
let selectedRun = null, selectedProgram = null, chart = null, chartRun = null, refreshes = 0;

function statusClass(s) { return s === "ok" ? "ok" : (s === "pending" || s === "duplicate" || s === "not_judged" || !s) ? "muted" : "bad"; }

// k/M token counts, as the reports write them.
const tokens = (t) => t >= 1e6 ? (t / 1e6).toFixed(2) + "M" : t >= 1e3 ? (t / 1e3).toFixed(1) + "k" : esc(t);
// Every value the server sends (runs, queue, worker records anyone with the Redis password can write)
// goes into the page through esc() or textContent, numbers included: a field that should be a number
// may arrive as markup. A short id shown: the first n characters of whatever text it is.
const short = (id, n = 10) => esc(String(id ?? "").slice(0, n));
// The best correct candidate's speedup over the LibTorch reference: none before one is correct; green only when faster.
const bestCell = (r) => r.ok > 0 && r.best_program
  ? `<td class="${r.best_speedup >= 1 ? "ok" : ""}" title="over the LibTorch reference">${fmt(r.best_speedup)}x</td>`
  : '<td class="muted">none yet</td>';
// Candidates being measured: only while a search runs on the state (its writer lease).
const inFlightCell = (r) => r.live === false
  ? `<td class="muted" title="no search is running on this state${r.pending_left ? ` (${esc(r.pending_left)} left unmeasured)` : ""}">–</td>`
  : `<td>${esc(r.pending)}</td>`;

function renderRuns(runs) {
  const body = $("#runs tbody");
  body.innerHTML = "";
  if (!runs.length) body.innerHTML = '<tr><td colspan="12" class="muted">no runs yet</td></tr>';
  if (!selectedRun && runs.length) selectedRun = runs.find((r) => !r.error)?.id || runs[0].id;
  for (const r of runs) {
    const tr = document.createElement("tr");
    tr.dataset.run = r.id;
    if (r.id === selectedRun) tr.className = "sel";
    tr.innerHTML = r.error
      ? `<td>${esc(r.registered?.task || "?")}</td><td colspan="9" class="bad">${esc(r.error)}</td><td>${esc(r.state)}</td><td></td>`
      : `<td>${esc(r.task)}</td><td>${esc(r.arch)}</td><td>${r.generation >= 0 ? esc(r.generation) : "none yet"} / ${esc(r.generations)}</td>` +
        bestCell(r) + `<td>${esc(r.ok)}</td><td>${esc(r.failed)}</td><td class="muted">${esc(r.not_judged ?? 0)}</td>` + inFlightCell(r) +
        `<td>${tokens(r.tokens)}</td><td>$${fmt(r.cost_usd, 4)}</td><td>${esc(r.state)}</td>` +
        `<td>${esc(r.stop_reason || (r.live === false ? "not running" : ""))}</td>`;
    tr.onclick = () => { selectedRun = r.id; selectedProgram = null; refresh(); };
    body.appendChild(tr);
  }
  const run = runs.find((r) => r.id === selectedRun);
  if (run && !run.error) {
    renderChart(run);
    if (!selectedProgram && run.best_program) { selectedProgram = run.best_program; showProgram(); }
  }
}

function renderChart(run) {
  const xs = [], ys = [];
  for (const [t, best] of run.timeline) { xs.push(t); ys.push(best); }
  $("#chart-title").textContent = `Best speedup over the LibTorch reference over time: ${run.task} (${run.arch})`;
  if (!xs.length) {  // a sentence, not an empty chart
    if (chart) { chart.destroy(); chart = null; chartRun = null; }
    $("#chart").innerHTML = `<p class="muted nodata">${run.ok + run.failed > 0 ? "no correct candidate yet" : "no candidate was evaluated"}</p>`;
    return;
  }
  const data = [xs, ys];
  const width = Math.max(400, $("#chart-box").clientWidth - 10);
  if (chart && chartRun === run.id) { chart.setData(data); return; }
  if (chart) chart.destroy();
  $("#chart").innerHTML = "";
  chartRun = run.id;
  chart = new uPlot({
    width, height: 220,
    scales: { x: { time: false } },
    axes: [{ label: "seconds since the first candidate" }, { label: "best speedup (x)" }],
    series: [{ label: "s" }, { label: "best so far", stroke: "#1a73e8", width: 2, paths: uPlot.paths.stepped({ align: 1 }),
      points: { show: true, size: 5 } }],
  }, data, $("#chart"));
}

function renderQueue(q) {
  if (!q) return;
  if (q.error) { $("#queue").innerHTML = `<span class="bad">${esc(q.error)}</span>`; return; }
  const s = q.stats || {};
  let html = `<div class="kv"><span>${esc(q.url)}</span><span>submitted ${esc(s.submitted || 0)}</span><span>done ${esc(s.done || 0)}</span>` +
    `<span>finished twice (counted once) ${esc(s.duplicate_results || 0)}</span><span>dead letters ${esc(s.dead_letters || 0)}</span></div>`;
  html += "<table><thead><tr><th>stream</th><th>waiting</th><th>in progress</th></tr></thead><tbody>";
  for (const [name, st] of Object.entries(s.streams || {})) html += `<tr><td>${esc(name)}</td><td>${esc(st?.queued)}</td><td>${esc(st?.pending)}</td></tr>`;
  html += "</tbody></table><h3>Recent jobs</h3><table><thead><tr><th>job</th><th>kind</th><th>status</th><th>worker</th><th>attempts</th><th>wait</th><th>took</th></tr></thead><tbody>";
  for (const j of q.recent || [])
    html += `<tr><td>${short(j.id)}</td><td>${esc(j.kind)}</td><td class="${statusClass(j.status)}">${esc(j.status || j.state)}</td>` +
      `<td>${esc(j.worker)}</td><td>${esc(j.attempts)}</td><td>${fmt(j.started - j.submitted, 2)} s</td><td>${fmt(j.finished - j.started, 2)} s</td></tr>`;
  html += "</tbody></table>";
  if ((q.dead || []).length) {
    html += "<h3>Dead letters</h3><table><tbody>";
    for (const d of q.dead) html += `<tr><td>${short(d.job)}</td><td class="bad">${esc(d.reason)}</td></tr>`;
    html += "</tbody></table>";
  }
  $("#queue").className = "";
  $("#queue").innerHTML = html;
}

function renderWorkers(workers, now) {
  const body = $("#workers tbody");
  body.innerHTML = "";
  if (!workers) { body.innerHTML = '<tr><td colspan="9" class="muted">no queue</td></tr>'; return; }
  if (!workers.length) body.innerHTML = '<tr><td colspan="9" class="muted">no worker has started</td></tr>';
  let logs = "";
  for (const w of workers) {
    const lost = w.state !== "stopped" && w.age_s > 3 * (w.lease_s || 30);
    const state = lost ? "lost" : w.state;
    const wall = Math.max(1, now - w.started);
    const dev = w.kind !== "gpu" ? "—" : w.device && w.device.present ? `${w.gpu}: ${w.device.name}` : `${w.gpu}`;
    const job = w.job ? `${w.job.kind} ${String(w.job.id ?? "").slice(0, 10)} (${fmt(now - w.job.since, 1)} s)` : "";
    body.insertAdjacentHTML("beforeend", `<tr><td>${esc(w.name)}</td><td>${esc(w.kind)}</td><td>${esc(dev)}</td>` +
      `<td class="${state === "busy" ? "busy" : state === "lost" ? "lost" : ""}">${esc(state)}</td><td>${esc(job)}</td>` +
      `<td>${esc(w.jobs)}</td><td>${esc(w.reclaimed)}</td><td>${w.kind === "gpu" ? esc(Math.round(100 * w.busy_s / wall)) + "%" : ""}</td>` +
      `<td>${esc(age(w.age_s))}</td></tr>`);
    logs += `<div class="logs"><h3>${esc(w.name)}</h3><pre>${esc(Array.isArray(w.log) ? w.log.join("\n") : w.log)}</pre></div>`;
  }
  $("#worker-logs").innerHTML = logs;
}

function renderPrograms(programs) {
  const body = $("#programs tbody");
  body.innerHTML = "";
  for (const p of programs.slice().reverse()) {
    const tr = document.createElement("tr");
    if (p.id === selectedProgram) tr.className = "sel";
    tr.innerHTML = `<td>${esc(p.id)}</td><td>${esc(p.key)}</td><td>${esc(p.origin)}</td><td class="${statusClass(p.status)}">${esc(p.status)}</td>` +
      `<td>${p.status === "ok" ? fmt(p.speedup) + "x" : ""}</td><td>${esc(p.worker)}</td>`;
    tr.onclick = () => { selectedProgram = p.id; showProgram(); renderPrograms(programs); };
    body.appendChild(tr);
  }
}

function diffHtml(diff) {
  return diff.split("\n").map((l) => l.startsWith("+ ") ? `<span class="add">${esc(l)}</span>` :
    l.startsWith("- ") ? `<span class="del">${esc(l)}</span>` : esc(l)).join("\n");
}

function showProgram() {
  if (!selectedRun || !selectedProgram) return;
  api(`/api/runs/${encodeURIComponent(selectedRun)}/programs/${encodeURIComponent(selectedProgram)}`).then((p) => {
    let html = `<div class="kv"><span>#${esc(p.id)} ${esc(p.key)}</span><span>${esc(p.origin)}</span>` +
      `<span class="${statusClass(p.status)}">${esc(p.status)}${p.status === "ok" ? " " + fmt(p.speedup) + "x" : ""}</span>` +
      (p.parent_id ? `<span>parent #${esc(p.parent_id)}</span>` : "") + (p.worker ? `<span>${esc(p.worker)}</span>` : "") + "</div>";
    html += `<h3>Validation log</h3><pre>${esc(p.log || p.feedback || "(none)")}</pre>`;
    if (p.diff !== undefined) html += `<h3>Diff to its parent #${esc(p.parent_id)}</h3><pre>${diffHtml(String(p.diff))}</pre>`;
    html += `<h3>Source</h3><pre>${esc(p.source)}</pre>`;
    $("#program").className = "detail";
    $("#program").innerHTML = html;
  }).catch((e) => { $("#program").textContent = String(e); });
}

function refresh() {
  api("/api/overview").then((o) => {
    renderRuns(o.runs);
    renderQueue(o.queue);
    renderWorkers(o.workers, o.now);
    document.body.dataset.refreshes = ++refreshes;  // the tests read it: the page keeps updating
    $("#status").textContent = `updated ${new Date().toLocaleTimeString()}`;
    const run = o.runs.find((r) => r.id === selectedRun);
    $("#cand-run").textContent = run ? `${run.task || ""} ${run.state}` : "";
    if (selectedRun) return api(`/api/runs/${encodeURIComponent(selectedRun)}/programs`).then(renderPrograms);
  }).catch((e) => { $("#status").textContent = "error: " + e; });
}
refresh();
setInterval(refresh, 2000);
