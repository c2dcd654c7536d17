// The live dashboard: polls /admin/latency, /admin/latency/history, /admin/features,
// /admin/slo, /admin/usage, /admin/batches and /metrics every two seconds and draws what they
// say. What clients waited (from arrival) comes first and is never shown as the upstreams'
// attempt time (from each attempt's start). No library, no CDN: everything is in this file.
"use strict";

const POLL_MS = 2000;
const HISTORY = 90;
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { Authorization: "Bearer " + token } : {};
const state = { previous: null, previousAt: 0, heat: [], edges: [], features: {} };
const SVG = "http://www.w3.org/2000/svg";

window.addEventListener("error", () => count("errors"));
const consoleError = console.error.bind(console);
console.error = (...args) => { count("errors"); consoleError(...args); };

function count(what) {
  document.body.dataset[what] = String(Number(document.body.dataset[what] || 0) + 1);
}

function el(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A table of `rows`; with none, "none yet", or `off` (why the feature is off) when given.
function table(id, head, rows, off) {
  const t = document.getElementById(id);
  t.replaceChildren();
  const tr = el("tr");
  head.forEach(h => tr.appendChild(el("th", h)));
  t.appendChild(tr);
  if (rows.length === 0) {
    const r = el("tr");
    r.appendChild(el("td", off ? "off: " + off : "none yet", { colspan: String(head.length), class: off ? "off" : "" }));
    t.appendChild(r);
  }
  for (const row of rows) {
    const r = el("tr");
    for (const cell of row) {
      const td = cell && typeof cell === "object" ? el("td", cell.text, cell.attrs) : el("td", cell);
      // Figures stay on one line; names may wrap, so every column fits a narrow panel.
      if (NUMERIC.test(td.textContent)) td.classList.add("num");
      r.appendChild(td);
    }
    t.appendChild(r);
  }
}

const NUMERIC = /^[-+]?[\d.,]+\s*(%|ms|s|\/s)?$/;

// Prometheus text: [{name, labels, value}].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    }
    out.push({ name: m[1], labels, value: parseFloat(m[4]) });
  }
  return out;
}

function key(s) { return s.name + JSON.stringify(s.labels); }

function sum(samples, name, by, filter) {
  const out = new Map();
  for (const s of samples) {
    if (s.name !== name || (filter && !filter(s.labels))) continue;
    const k = by.map(b => s.labels[b] || "-").join(" ");
    out.set(k, (out.get(k) || 0) + s.value);
  }
  return out;
}

// Per-second rates of counters since the last poll.
function rates(samples, name, by, now) {
  const out = new Map();
  const dt = state.previous ? (now - state.previousAt) / 1000 : 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    const before = state.previous ? state.previous.get(key(s)) : undefined;
    const k = by.map(b => s.labels[b] || "-").join(" ");
    const r = dt > 0 && before !== undefined ? Math.max(0, s.value - before) / dt : 0;
    out.set(k, (out.get(k) || 0) + r);
  }
  return out;
}

const ms = x => String(Math.round(x));
const pct = x => (100 * x).toFixed(1) + "%";

const seconds = ms => ms >= 10000 ? (ms / 1000).toFixed(0) + " s" : ms >= 1000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms) + " ms";

function percentileCells(row, keyParts, windows) {
  for (const phase of ["ttfb", "total"]) {
    for (const p of ["p50", "p95", "p99", "p999"]) {
      row.push({ text: ms(windows[phase][p]), attrs: { "data-key": [...keyParts, phase, p].join("|") } });
    }
  }
}

// What clients waited, from arrival: per lane, group and tenant class.
function drawClients(report) {
  const rows = [];
  const keys = [...(report.clients || [])].sort((a, b) => (a.lane + a.group + a.class).localeCompare(b.lane + b.group + b.class));
  for (const c of keys) {
    const row = [c.lane, c.group, c.class, String(c.total.count)];
    percentileCells(row, ["client", c.lane, c.group, c.class], c);
    rows.push(row);
  }
  table("clients", ["lane", "group", "class", "calls", "first byte P50", "P95", "P99", "P999", "last byte P50", "P95", "P99", "P999"], rows);
}

// What upstreams' attempts took, each from its own start.
function drawLatency(report) {
  const rows = [];
  const pairs = [...report.upstreams].sort((a, b) => (a.group + a.upstream + a.mode).localeCompare(b.group + b.upstream + b.mode));
  for (const u of pairs) {
    const row = [u.group, u.upstream, u.mode, String(u.total.count)];
    percentileCells(row, [u.group, u.upstream, u.mode], u);
    rows.push(row);
  }
  table("latency", ["group", "upstream", "mode", "attempts", "ttfb P50", "P95", "P99", "P999", "total P50", "P95", "P99", "P999"], rows);
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// The trend the server holds, one chart per lane (interactive first): the lane's client
// percentiles with the answering attempts' own first byte P99 dashed beside them, on
// labelled axes, each chart on its own scale (its top in its legend).
function drawTrend(history) {
  const box = document.getElementById("trend");
  box.replaceChildren();
  const legend = document.getElementById("trend-legend");
  if (history === null) {
    legend.replaceChildren(el("span", "off: the gateway keeps no recent calls ([diagnose] keep = 0)", { class: "off" }));
    return;
  }
  const lanes = Object.keys(history.lanes || {}).sort((a, b) =>
    a === "interactive" ? -1 : b === "interactive" ? 1 : a.localeCompare(b));
  if (lanes.length === 0) {
    legend.replaceChildren(el("span", "none yet"));
    return;
  }
  legend.replaceChildren();
  for (const lane of lanes) {
    const chart = svg("svg", { viewBox: "0 0 600 180", "data-lane": lane });
    const caption = el("div", undefined, { class: "legend" });
    drawLane(chart, caption, lane, history.lanes[lane], history.step_seconds);
    box.appendChild(caption);
    box.appendChild(chart);
  }
}

// One lane's chart and its legend.
function drawLane(box, legend, lane, steps, step) {
  const [W, H, L, B] = [600, 180, 48, 22];
  const span = Math.max(step, ...steps.map(s => s.ago_seconds)) + step;
  const top = Math.max(0.001, ...steps.map(s => s.total[3]), ...steps.map(s => s.attempt_ttfb_p99 ?? 0));
  const x = ago => L + (1 - ago / span) * (W - L - 8);
  const y = v => (H - B) - (v / top) * (H - B - 8);
  box.appendChild(svg("line", { x1: L, y1: H - B, x2: W - 8, y2: H - B, stroke: "#99a" }));
  box.appendChild(svg("line", { x1: L, y1: 8, x2: L, y2: H - B, stroke: "#99a" }));
  for (const f of [0, 0.5, 1]) {
    box.appendChild(svg("text", { x: L - 4, y: y(top * f) + 4, "text-anchor": "end", "font-size": 11, fill: "#556" }, seconds(top * f * 1000)));
  }
  for (const f of [1, 0.5, 0]) {
    const ago = Math.round(span * f);
    box.appendChild(svg("text", { x: x(ago), y: H - 6, "text-anchor": f === 1 ? "start" : f === 0 ? "end" : "middle", "font-size": 11, fill: "#556" }, ago === 0 ? "now" : "-" + seconds(ago * 1000)));
  }
  const lines = [
    ["P50", "#4e79a7", s => s.total[0], ""], ["P95", "#59a14f", s => s.total[1], ""],
    ["P99", "#f28e2b", s => s.total[2], ""], ["P999", "#e15759", s => s.total[3], ""],
    ["upstream attempts' first byte P99", "#76b7b2", s => s.attempt_ttfb_p99, "5 4"],
  ];
  for (const [, color, f, dash] of lines) {
    // A step where no call had the figure (no attempt answered) is a gap, never a zero.
    const pts = steps.filter(s => f(s) !== null && f(s) !== undefined)
      .map(s => `${x(s.ago_seconds).toFixed(1)},${y(f(s)).toFixed(1)}`).join(" ");
    box.appendChild(svg("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": dash }));
  }
  legend.appendChild(el("span", lane + " lane, clients (max " + seconds(top * 1000) + "):"));
  for (const [name, color] of lines) {
    const s = el("span", name);
    s.style.color = color;
    legend.appendChild(s);
  }
}

function drawHeatmap(samples) {
  // Requests per latency bucket since the last poll, all groups together.
  const cumulative = sum(samples, "sluice_request_duration_seconds_bucket", ["le"]);
  const entries = [...cumulative.entries()].sort((a, b) => Number(a[0]) - Number(b[0]));
  if (entries.length === 0) return;
  const edges = entries.map(e => Number(e[0]));
  const now = entries.map(e => e[1]);
  const last = state.heatLast;
  state.heatLast = now;
  if (!last || last.length !== now.length) return;
  const column = now.map((c, i) => Math.max(0, c - last[i] - (i > 0 ? now[i - 1] - last[i - 1] : 0)));
  state.heat.push(column);
  state.edges = edges;
  if (state.heat.length > HISTORY) state.heat.shift();
  const canvas = document.getElementById("heatmap");
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  // Axes: latency buckets up the left (their upper edges), polls along the bottom.
  const [L, B] = [52, 22];
  const plotW = canvas.width - L - 8, plotH = canvas.height - B - 8;
  g.strokeStyle = "#99a";
  g.beginPath(); g.moveTo(L, 8); g.lineTo(L, 8 + plotH); g.lineTo(L + plotW, 8 + plotH); g.stroke();
  g.fillStyle = "#556";
  g.font = "11px system-ui, sans-serif";
  g.textAlign = "right";
  const h = plotH / column.length;
  const every = Math.max(1, Math.ceil(column.length / 6));
  const yLabels = [];
  edges.forEach((edge, i) => {
    if (i % every !== 0 && i !== edges.length - 1) return;
    const label = Number.isFinite(edge) ? seconds(edge * 1000) : "+Inf";
    yLabels.push(label);
    g.fillText(label, L - 4, 8 + plotH - i * h - h / 2 + 4);
  });
  canvas.dataset.yAxis = yLabels.join(",");
  g.textAlign = "left";
  g.fillText("-" + Math.round((HISTORY * POLL_MS) / 1000) + " s", L, canvas.height - 6);
  g.textAlign = "right";
  g.fillText("now", L + plotW, canvas.height - 6);
  const top = Math.max(1, ...state.heat.flat());
  const w = plotW / HISTORY;
  const offset = HISTORY - state.heat.length;
  state.heat.forEach((col, x) => col.forEach((n, y) => {
    if (n <= 0) return;
    const a = Math.log1p(n) / Math.log1p(top);
    g.fillStyle = `rgba(225, 87, 89, ${a.toFixed(3)})`;
    g.fillRect(L + (offset + x) * w, 8 + plotH - (y + 1) * h, w, h);
  }));
  g.fillStyle = "#556";
  g.textAlign = "center";
  g.fillText("darker: more requests (most: " + top + " in a poll)", L + plotW / 2, canvas.height - 6);
}

function drawGauges(samples, now) {
  const lanes = sum(samples, "sluice_admission_requests", ["group", "upstream", "lane", "state"]);
  const limits = sum(samples, "sluice_upstream_concurrency_limit", ["group", "upstream"]);
  const rows = [];
  const seen = new Map();
  for (const [k, v] of lanes) {
    const [group, upstream, lane, st] = k.split(" ");
    const id = [group, upstream, lane].join(" ");
    const r = seen.get(id) || { group, upstream, lane, inflight: 0, queued: 0 };
    r[st] = v;
    seen.set(id, r);
  }
  for (const r of seen.values()) {
    rows.push([r.group, r.upstream, r.lane, String(r.inflight), String(r.queued), String(limits.get(r.group + " " + r.upstream) ?? "-")]);
  }
  table("lanes", ["group", "upstream", "lane", "in flight", "queued", "limit"], rows,
    state.features.admission === false ? "no group has an admission limit" : undefined);
  const breakers = [];
  for (const s of samples) {
    if (s.name === "sluice_upstream_breaker_state" && s.value === 1) {
      breakers.push([s.labels.group, s.labels.upstream, { text: s.labels.state, attrs: s.labels.state === "closed" ? {} : { class: "bad" } }]);
    }
  }
  table("breakers", ["group", "upstream", "state"], breakers,
    state.features.breakers === false ? "no group has a breaker" : undefined);
  const attempts = [];
  for (const [k, v] of rates(samples, "sluice_upstream_attempts_total", ["upstream", "outcome"], now)) attempts.push(["attempt " + k, v.toFixed(2)]);
  for (const [k, v] of rates(samples, "sluice_hedges_total", ["group", "result"], now)) attempts.push(["hedge " + k, v.toFixed(2)]);
  for (const [k, v] of rates(samples, "sluice_retries_total", ["group", "outcome"], now)) attempts.push(["retry " + k, v.toFixed(2)]);
  table("attempts", ["what", "per second"], attempts);
  const caches = [];
  const answer = sum(samples, "sluice_answer_cache_requests_total", ["group", "result"]);
  const groups = new Set([...answer.keys()].map(k => k.split(" ")[0]));
  for (const g of groups) {
    const all = [...answer].filter(([k]) => k.split(" ")[0] === g).reduce((a, [, v]) => a + v, 0);
    const hit = (answer.get(g + " hit") || 0) + (answer.get(g + " coalesced") || 0);
    caches.push(["answer cache " + g, all > 0 ? pct(hit / all) : "-"]);
  }
  const sem = sum(samples, "sluice_semantic_cache_lookups_total", ["group", "result"]);
  for (const g of new Set([...sem.keys()].map(k => k.split(" ")[0]))) {
    const all = [...sem].filter(([k]) => k.split(" ")[0] === g).reduce((a, [, v]) => a + v, 0);
    caches.push(["semantic cache " + g, all > 0 ? pct((sem.get(g + " hit") || 0) / all) : "-"]);
  }
  const tokens = sum(samples, "sluice_prompt_cache_tokens_total", ["group", "kind"]);
  for (const g of new Set([...tokens.keys()].map(k => k.split(" ")[0]))) {
    const prompt = tokens.get(g + " prompt") || 0;
    caches.push(["provider prompt cache " + g, prompt > 0 ? pct((tokens.get(g + " cached") || 0) / prompt) : "-"]);
  }
  const f = state.features;
  const noCache = f.answer_cache === false && f.semantic_cache === false && tokens.size === 0;
  table("caches", ["cache", "hit rate"], caches, noCache ? "no answer or semantic cache, and no prompt-cache usage reported" : undefined);
}

function drawSpend(samples, usage) {
  const rows = [];
  for (const [g, v] of sum(samples, "sluice_cost_micros_total", ["group"])) rows.push(["group " + g, (v / 1e6).toFixed(4)]);
  if (usage && Array.isArray(usage.rows)) {
    for (const r of usage.rows) rows.push(["tenant " + (r.tenant || "-"), (Number(r.cost_micros || 0) / 1e6).toFixed(4)]);
  } else {
    rows.push(["per tenant", "the usage ledger is off"]);
  }
  table("spend", ["who", "spent"], rows);
}

function drawSlos(slos) {
  const rows = (slos && slos.slos || []).map(s => [
    s.name, s.objective === null ? "-" : String(s.objective), String(s.good), String(s.bad),
    { text: s.budget_left === null ? "-" : pct(s.budget_left), attrs: s.budget_left !== null && s.budget_left < 0 ? { class: "bad" } : {} },
  ]);
  table("slos", ["SLO", "objective", "good", "bad", "budget left"], rows,
    state.features.slos === false ? "no [slo] is configured" : undefined);
}

// Jobs that have not ended, each with a bar of its items ended and its line ("queued 47/200").
function drawBatches(jobs) {
  const t = document.getElementById("batches");
  if (jobs === null) {
    table("batches", ["job"], [["batch jobs are off on this gateway"]]);
    return;
  }
  const rows = (jobs.data || []).map(j => {
    const p = j.sluice || {};
    const ended = (p.done || 0) + (p.failed || 0) + (p.cancelled || 0);
    const eta = p.eta_seconds === null || p.eta_seconds === undefined ? "-" : Math.round(p.eta_seconds) + " s";
    return [j.id, j.tenant || "-", j.status, { bar: ended, of: p.total || 0 }, p.line || "-",
      String(p.ahead || 0), (p.per_second || 0).toFixed(1), eta];
  });
  table("batches", ["job", "tenant", "status", "progress", "queued", "ahead", "items/s", "ETA"],
    rows.map(r => r.map(c => (c && c.bar !== undefined) ? (c.bar + "/" + c.of) : c)));
  // The progress cells as bars.
  t.querySelectorAll("tr").forEach((tr, i) => {
    if (i === 0 || !rows[i - 1]) return;
    const cell = tr.children[3];
    const bar = el("progress", undefined, { value: String(rows[i - 1][3].bar), max: String(rows[i - 1][3].of || 1) });
    cell.replaceChildren(bar, el("span", " " + cell.textContent));
  });
}

async function fetchJson(path) {
  const r = await fetch(path, { headers });
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(path + " answered " + r.status);
  return r.json();
}

async function poll() {
  try {
    const [latency, metricsText, slos, usage, jobs, features, history] = await Promise.all([
      fetchJson("/admin/latency"),
      fetch("/metrics", { headers }).then(r => {
        if (!r.ok) throw new Error("/metrics answered " + r.status);
        return r.text();
      }),
      fetchJson("/admin/slo"),
      fetchJson("/admin/usage?group_by=tenant"),
      fetchJson("/admin/batches"),
      fetchJson("/admin/features"),
      fetchJson("/admin/latency/history?step=10"),
    ]);
    state.features = features || {};
    const now = Date.now();
    const samples = parseMetrics(metricsText);
    drawClients(latency);
    drawLatency(latency);
    drawTrend(history);
    drawHeatmap(samples);
    drawGauges(samples, now);
    drawSpend(samples, usage);
    drawSlos(slos);
    drawBatches(jobs);
    state.previous = new Map(samples.map(s => [key(s), s.value]));
    state.previousAt = now;
    count("updates");
    // Panels whose content is wider than they are (read by the browser test at each width).
    const over = [...document.querySelectorAll("section")].filter(s => s.scrollWidth > s.clientWidth + 1);
    document.body.dataset.overflow = String(over.length);
    document.body.dataset.overflowing = over.map(s => s.querySelector("h2").textContent).join(" | ");
    document.getElementById("status").textContent =
      "updated " + new Date(now).toLocaleTimeString() + " - window " + latency.window_seconds + " s";
  } catch (e) {
    console.error("dashboard: " + e);
    document.getElementById("status").textContent = "cannot reach the gateway: " + e;
  }
}

poll();
setInterval(poll, POLL_MS);
