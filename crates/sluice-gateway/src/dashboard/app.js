// The live dashboard: polls /admin/latency, /admin/slo, /admin/usage, /admin/batches and
// /metrics every two seconds and draws what they say. No library, no CDN: everything is in this file.
"use strict";

const POLL_MS = 2000;
const HISTORY = 90;
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { Authorization: "Bearer " + token } : {};
const state = { previous: null, previousAt: 0, trend: [], heat: [], edges: [] };

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

function table(id, head, rows) {
  const t = document.getElementById(id);
  t.replaceChildren();
  const tr = el("tr");
  head.forEach(h => tr.appendChild(el("th", h)));
  t.appendChild(tr);
  if (rows.length === 0) {
    const r = el("tr");
    r.appendChild(el("td", "none yet", { colspan: String(head.length) }));
    t.appendChild(r);
  }
  for (const row of rows) {
    const r = el("tr");
    for (const cell of row) {
      if (cell && typeof cell === "object") r.appendChild(el("td", cell.text, cell.attrs));
      else r.appendChild(el("td", cell));
    }
    t.appendChild(r);
  }
}

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

function drawLatency(report) {
  const rows = [];
  const pairs = [...report.upstreams].sort((a, b) => (a.group + a.upstream + a.mode).localeCompare(b.group + b.upstream + b.mode));
  for (const u of pairs) {
    const row = [u.group, u.upstream, u.mode, String(u.total.count)];
    for (const phase of ["ttfb", "total"]) {
      for (const p of ["p50", "p95", "p99", "p999"]) {
        row.push({ text: ms(u[phase][p]), attrs: { "data-key": [u.group, u.upstream, u.mode, phase, p].join("|") } });
      }
    }
    rows.push(row);
  }
  table("latency", ["group", "upstream", "mode", "calls", "ttfb P50", "P95", "P99", "P999", "total P50", "P95", "P99", "P999"], rows);
  // The trend: the slowest pair's total percentiles, poll by poll.
  const worst = pairs.reduce((w, u) => (!w || u.total.p99 > w.total.p99 ? u : w), null);
  if (worst) {
    state.trend.push({ p50: worst.total.p50, p95: worst.total.p95, p99: worst.total.p99, p999: worst.total.p999 });
    if (state.trend.length > HISTORY) state.trend.shift();
    drawTrend(worst.group + " / " + worst.upstream);
  }
}

function drawTrend(label) {
  const svg = document.getElementById("trend");
  svg.replaceChildren();
  const top = Math.max(1, ...state.trend.map(t => t.p999));
  const colors = { p50: "#4e79a7", p95: "#59a14f", p99: "#f28e2b", p999: "#e15759" };
  for (const [p, color] of Object.entries(colors)) {
    const pts = state.trend.map((t, i) => `${(i / Math.max(1, HISTORY - 1)) * 400},${160 - (t[p] / top) * 150}`).join(" ");
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", pts);
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", color);
    line.setAttribute("stroke-width", "2");
    svg.appendChild(line);
  }
  const legend = document.getElementById("trend-legend");
  legend.replaceChildren(el("span", label + " (max " + ms(top) + " ms):"));
  for (const [p, color] of Object.entries(colors)) {
    const s = el("span", p.toUpperCase());
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
  const top = Math.max(1, ...state.heat.flat());
  const w = canvas.width / HISTORY;
  const h = canvas.height / column.length;
  state.heat.forEach((col, x) => col.forEach((n, y) => {
    if (n <= 0) return;
    const a = Math.log1p(n) / Math.log1p(top);
    g.fillStyle = `rgba(225, 87, 89, ${a.toFixed(3)})`;
    g.fillRect(x * w, canvas.height - (y + 1) * h, w, h);
  }));
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
  table("lanes", ["group", "upstream", "lane", "in flight", "queued", "limit"], rows);
  const breakers = [];
  for (const s of samples) {
    if (s.name === "sluice_upstream_breaker_state" && s.value === 1) {
      breakers.push([s.labels.group, s.labels.upstream, { text: s.labels.state, attrs: s.labels.state === "closed" ? {} : { class: "bad" } }]);
    }
  }
  table("breakers", ["group", "upstream", "state"], breakers);
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
  table("caches", ["cache", "hit rate"], caches);
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
  table("slos", ["SLO", "objective", "good", "bad", "budget left"], rows);
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
    const [latency, metricsText, slos, usage, jobs] = await Promise.all([
      fetchJson("/admin/latency"),
      fetch("/metrics").then(r => r.text()),
      fetchJson("/admin/slo"),
      fetchJson("/admin/usage?group_by=tenant"),
      fetchJson("/admin/batches"),
    ]);
    const now = Date.now();
    const samples = parseMetrics(metricsText);
    drawLatency(latency);
    drawHeatmap(samples);
    drawGauges(samples, now);
    drawSpend(samples, usage);
    drawSlos(slos);
    drawBatches(jobs);
    state.previous = new Map(samples.map(s => [key(s), s.value]));
    state.previousAt = now;
    count("updates");
    document.getElementById("status").textContent =
      "updated " + new Date(now).toLocaleTimeString() + " - window " + latency.window_seconds + " s";
  } catch (e) {
    console.error("dashboard: " + e);
    document.getElementById("status").textContent = "cannot reach the gateway: " + e;
  }
}

poll();
setInterval(poll, POLL_MS);
