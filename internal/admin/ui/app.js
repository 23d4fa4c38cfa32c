// relay's dashboard: polls GET /api/backends once a second and shows the
// difference between two polls as rates and latency percentiles.
"use strict";

const POLL_MS = 1000;
const HISTORY = 60; // points kept for the charts, one per poll

const state = { prev: null, total: { rps: [], p99: [] }, backends: new Map() };
const token = new URLSearchParams(location.hash.slice(1)).get("token");

function headers() {
  const h = { "Accept": "application/json" };
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

// quantile estimates the q-quantile (0..1) of the requests counted between
// two cumulative histograms, interpolating within the bucket it falls in.
function quantile(q, bounds, now, before) {
  const n = now.length;
  const c = now.map((v, i) => v - (before ? before[i] : 0));
  const total = c[n - 1];
  if (total <= 0) return null;
  const rank = q * total;
  let i = 0;
  while (i < n - 1 && c[i] < rank) i++;
  if (i >= bounds.length) return bounds[bounds.length - 1];
  const lower = i === 0 ? 0 : bounds[i - 1];
  const prev = i === 0 ? 0 : c[i - 1];
  const inBucket = c[i] - prev;
  const frac = inBucket > 0 ? (rank - prev) / inBucket : 1;
  return lower + (bounds[i] - lower) * frac;
}

// delta is what happened to one set of counters between two polls.
function delta(now, before, seconds) {
  const d = { rps: null, err: null, p50: null, p99: null };
  if (!before || seconds <= 0) return d;
  const reqs = now.requests - before.requests;
  d.rps = Math.max(reqs, 0) / seconds;
  d.err = reqs > 0 ? (now.responses["5xx"] - before.responses["5xx"]) / reqs : 0;
  d.p50 = quantile(0.5, now.latency.bounds, now.latency.counts, before.latency.counts);
  d.p99 = quantile(0.99, now.latency.bounds, now.latency.counts, before.latency.counts);
  return d;
}

function push(arr, v) {
  arr.push(v);
  if (arr.length > HISTORY) arr.shift();
}

const fmt = {
  int: (v) => v == null ? "–" : Math.round(v).toLocaleString("en-US"),
  rate: (v) => v == null ? "–" : v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US"),
  pct: (v) => v == null ? "–" : (v * 100).toFixed(v > 0 && v < 0.01 ? 2 : 1) + "%",
  ms: (s) => s == null ? "–" : s * 1000 < 10 ? (s * 1000).toFixed(2) + " ms" : (s * 1000).toFixed(0) + " ms",
};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

const SVG = "http://www.w3.org/2000/svg";

// line draws values (nulls skipped) into svg as a polyline scaled to its
// viewBox, with an area under it when filled.
function line(svg, values, filled) {
  const [, , w, h] = svg.getAttribute("viewBox").split(" ").map(Number);
  svg.replaceChildren();
  // Points before the first measured one are not zeros: nothing was known.
  const first = values.findIndex((v) => v != null);
  if (first < 0) return;
  const vs = values.slice(first).map((v) => v == null ? 0 : v);
  const top = Math.max(...vs, 1e-9);
  const step = w / (HISTORY - 1);
  const x0 = w - step * (vs.length - 1);
  const pts = vs.map((v, i) => `${(x0 + i * step).toFixed(1)},${(h - 4 - (v / top) * (h - 18)).toFixed(1)}`);
  if (filled) {
    const area = document.createElementNS(SVG, "polygon");
    area.setAttribute("class", "area");
    area.setAttribute("points", `${x0},${h} ${pts.join(" ")} ${w},${h}`);
    svg.append(area);
  }
  const pl = document.createElementNS(SVG, "polyline");
  pl.setAttribute("points", pts.join(" "));
  svg.append(pl);
  if (filled) {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", "4");
    t.setAttribute("y", "12");
    t.textContent = "max " + fmt.rate(top);
    svg.append(t);
  }
}

function tile(label, value, bad) {
  return el("div", { class: "tile" }, el("div", { class: "label" }, label),
    el("div", { class: "value" + (bad ? " bad" : "") }, value));
}

async function act(name, action, button) {
  button.disabled = true;
  try {
    const r = await fetch(`/api/backends/${encodeURIComponent(name)}/${action}`, { method: "POST", headers: headers() });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      showError(`${action} ${name}: ${body.error || r.status + " " + r.statusText}`);
    } else {
      showError("");
    }
  } catch (e) {
    showError(`${action} ${name}: ${e.message}`);
  }
  poll();
}

function showError(msg) {
  const e = document.getElementById("error");
  e.textContent = msg;
  e.hidden = msg === "";
}

function render(data, seconds) {
  const prev = state.prev;
  document.getElementById("meta").textContent =
    `${data.algorithm} · ${data.backends.length} backends · ${data.processes} process${data.processes === 1 ? "" : "es"} · configuration ${data.generation}`;

  const t = data.totals;
  const td = delta(t, prev && prev.totals, seconds);
  push(state.total.rps, td.rps);
  push(state.total.p99, td.p99 == null ? null : td.p99 * 1000);
  const inRotation = data.backends.filter((b) => b.in_rotation).length;
  document.getElementById("totals").replaceChildren(
    tile("Requests/s", fmt.rate(td.rps)),
    tile("Errors (5xx)", fmt.pct(td.err), td.err > 0.01),
    tile("p50", fmt.ms(td.p50)),
    tile("p99", fmt.ms(td.p99)),
    tile("In flight", fmt.int(t.in_flight)),
    tile("Queued", fmt.int(data.queued), data.queued > 0),
    tile("Connections", fmt.int(t.connections_open)),
    tile("In rotation", `${inRotation} / ${data.backends.length}`, inRotation < data.backends.length),
    tile("Requests", fmt.int(t.requests)),
    tile("Retries", fmt.int(t.retries)),
  );
  line(document.getElementById("chart-rps"), state.total.rps, true);
  line(document.getElementById("chart-p99"), state.total.p99, true);

  const before = new Map((prev ? prev.backends : []).map((b) => [b.name, b]));
  const rows = [];
  const seen = new Set();
  for (const b of data.backends) {
    seen.add(b.name);
    let hist = state.backends.get(b.name);
    if (!hist) state.backends.set(b.name, hist = []);
    const d = delta(b, before.get(b.name), seconds);
    push(hist, d.rps);
    const spark = document.createElementNS(SVG, "svg");
    spark.setAttribute("class", "spark");
    spark.setAttribute("viewBox", "0 0 120 26");
    spark.setAttribute("preserveAspectRatio", "none");
    line(spark, hist, false);
    const taken = b.draining || b.disabled;
    const button = el("button", { "data-action": taken ? "enable" : "drain", "data-backend": b.name }, taken ? "Enable" : "Drain");
    button.addEventListener("click", () => act(b.name, button.dataset.action, button));
    const why = b.state === "ejected" && b.ejected_until ? `breaker ${b.breaker} until ${new Date(b.ejected_until).toLocaleTimeString()}` : `health ${b.healthy ? "passing" : "failing"}, breaker ${b.breaker}`;
    rows.push(el("tr", { "data-backend": b.name },
      el("td", { class: "name" }, b.name),
      el("td", {}, el("span", { class: "badge " + b.state, title: why }, b.state)),
      el("td", { class: "num" }, b.weight === b.configured_weight ? String(b.weight) : `${b.weight} (${b.configured_weight})`),
      el("td", { class: "num" }, fmt.int(b.in_flight)),
      el("td", { class: "num rps" }, fmt.rate(d.rps)),
      el("td", {}, spark),
      el("td", { class: "num" + (d.err > 0.01 ? " bad" : "") }, fmt.pct(d.err)),
      el("td", { class: "num" }, fmt.ms(d.p50)),
      el("td", { class: "num" }, fmt.ms(d.p99)),
      el("td", { class: "num" }, fmt.int(b.requests)),
      el("td", {}, button),
    ));
  }
  for (const name of state.backends.keys()) if (!seen.has(name)) state.backends.delete(name);
  document.querySelector("#backends tbody").replaceChildren(...rows);
}

let timer = null;
async function poll() {
  clearTimeout(timer);
  const status = document.getElementById("status");
  try {
    const r = await fetch("/api/backends", { headers: headers(), cache: "no-store" });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      throw new Error(body.error || `${r.status} ${r.statusText}`);
    }
    const data = await r.json();
    const seconds = state.prev ? (Date.parse(data.time) - Date.parse(state.prev.time)) / 1000 : 0;
    render(data, seconds);
    state.prev = data;
    status.textContent = "live";
    status.className = "status ok";
  } catch (e) {
    status.textContent = "relay unreachable: " + e.message;
    status.className = "status bad";
  }
  timer = setTimeout(poll, POLL_MS);
}

poll();
