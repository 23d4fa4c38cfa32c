// relay's dashboard. It polls GET /api/pools once a second and shows
// the difference between two polls as rates and latency percentiles, the
// way Prometheus's rate() and histogram_quantile() would over a window of
// about a second: the tiles and charts for relay as a whole, each pool's
// backends under the pool's name. No framework, no build step: the page must work from
// the binary alone, offline, under "Content-Security-Policy: default-src
// 'self'" (so no inline script, no inline style, no eval).
"use strict";

const POLL_MS = 1000;           // how often the API is polled
const FETCH_TIMEOUT_MS = 3000;  // a poll taking longer counts as failed
const SPAN_S = 60;              // seconds of history the charts show
const MIN_WINDOW_S = 0.9;       // shortest window a rate is computed over
const KEEP_S = 10;              // seconds of raw polls kept for windows
const SVG_NS = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- API

// The admin token, when relay wants one, comes from the address:
// http://host:port/#token=SECRET. The fragment never leaves the browser.
let token = tokenFromHash();
function tokenFromHash() {
  return new URLSearchParams(location.hash.slice(1)).get("token") || "";
}

// api calls the admin API and returns its JSON answer. A failure throws
// an Error whose status is the HTTP status (0 when relay was not reached)
// and whose message is the API's {"error": ...} when it sent one.
async function api(path, method) {
  const headers = { "Accept": "application/json" };
  if (token) headers["Authorization"] = "Bearer " + token;
  // relay refuses a call that changes something unless it says it is
  // JSON, body or not: a page on another site cannot send that header.
  if (method && method !== "GET") headers["Content-Type"] = "application/json";
  let r;
  try {
    r = await fetch(path, {
      method: method || "GET",
      headers,
      cache: "no-store",
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
  } catch (e) {
    const err = new Error(e.name === "TimeoutError" ? "no answer within " + FETCH_TIMEOUT_MS / 1000 + " s" : "no connection");
    err.status = 0;
    throw err;
  }
  let body = null;
  try {
    body = await r.json();
  } catch (e) {
    body = null;
  }
  if (!r.ok) {
    let msg = body && typeof body.error === "string" ? body.error : (r.statusText || "error");
    if (r.status === 401 && !token) msg += " (open this page as …/#token=YOUR_TOKEN)";
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  if (body === null) {
    const err = new Error("the answer is not JSON");
    err.status = r.status;
    throw err;
  }
  return body;
}

// ------------------------------------------------------------- maths

// histogramQuantile estimates the q-quantile (0 ≤ q ≤ 1) of the values
// counted in a histogram, as Prometheus's histogram_quantile() does:
// counts are cumulative, counts[i] for values ≤ bounds[i], and the last
// count, one more than there are bounds, is for +Inf (everything). The
// value is interpolated linearly within the bucket the rank falls in; a
// rank in the +Inf bucket gives the highest finite bound; the first
// bucket starts at 0. Returns null when nothing was counted.
function histogramQuantile(q, bounds, counts) {
  const n = counts.length;
  if (n < 2 || n !== bounds.length + 1) return null;
  const total = counts[n - 1];
  if (!(total > 0)) return null;
  const rank = q * total;
  let b = 0;
  while (b < n - 1 && counts[b] < rank) b++;
  if (b === n - 1) return bounds[n - 2];
  const upper = bounds[b];
  if (b === 0 && upper <= 0) return upper;
  const lower = b === 0 ? 0 : bounds[b - 1];
  const below = b === 0 ? 0 : counts[b - 1];
  const inBucket = counts[b] - below;
  if (!(inBucket > 0)) return lower;
  return lower + (upper - lower) * ((rank - below) / inBucket);
}

function class5xx(c) {
  return (c && c.responses && c.responses["5xx"]) || 0;
}

// change is what happened to one set of counters (the API's Counts)
// between an older poll and a newer one, dt seconds apart: requests per
// second, the share of them answered 5xx, and latency percentiles and
// mean of the requests answered in between. Unknown values are null.
function change(cur, old, dt) {
  const out = { rps: null, errShare: null, errRate: null, p50: null, p99: null, mean: null };
  if (!cur || !old || !(dt > 0)) return out;
  const n = cur.requests - old.requests;
  if (!(n >= 0)) return out; // a counter went back: relay restarted
  out.rps = n / dt;
  const e = Math.max(class5xx(cur) - class5xx(old), 0);
  out.errRate = e / dt;
  if (n === 0) return out;
  out.errShare = Math.min(e / n, 1);
  const lc = cur.latency, lo = old.latency;
  if (lc && lo && Array.isArray(lc.counts) && Array.isArray(lo.counts) &&
      lc.counts.length === lo.counts.length && sameBounds(lc.bounds, lo.bounds)) {
    const diff = lc.counts.map((c, i) => c - lo.counts[i]);
    out.p50 = histogramQuantile(0.5, lc.bounds, diff);
    out.p99 = histogramQuantile(0.99, lc.bounds, diff);
    const count = diff[diff.length - 1];
    if (count > 0 && typeof lc.sum_seconds === "number") out.mean = (lc.sum_seconds - lo.sum_seconds) / count;
  }
  return out;
}

function sameBounds(a, b) {
  return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => v === b[i]);
}

// niceCeil rounds v up to a round number (1, 1.5, 2, 2.5, 3, 4, 5, 6 or
// 8 times a power of ten), for a chart's scale: close enough above the
// data to use the height, round enough to read, and half of it too.
function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  const f = v / p;
  for (const n of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8]) if (f <= n * (1 + 1e-9)) return n * p;
  return 10 * p;
}

// --------------------------------------------------------- formatting

const DASH = "–";
const intFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

const fmt = {
  int: (v) => (v == null || !isFinite(v)) ? DASH : intFmt.format(v),
  rate: (v) => {
    if (v == null || !isFinite(v)) return DASH;
    if (v === 0) return "0";
    return v < 10 ? v.toFixed(1) : intFmt.format(v);
  },
  share: (v) => {
    if (v == null || !isFinite(v)) return DASH;
    if (v === 0) return "0%";
    if (v < 0.001) return "<0.1%";
    return (v * 100).toFixed(1) + "%";
  },
  dur: (s) => {
    if (s == null || !isFinite(s)) return DASH;
    const ms = s * 1000;
    if (ms < 10) return ms.toFixed(2) + " ms";
    if (ms < 100) return ms.toFixed(1) + " ms";
    if (ms < 1000) return ms.toFixed(0) + " ms";
    return s.toFixed(s < 10 ? 2 : 1) + " s";
  },
  clock: (t) => new Date(t * 1000).toLocaleTimeString("en-GB", { hour12: false }),
};

function plural(n, one, many) {
  return n + " " + (n === 1 ? one : many);
}

// ---------------------------------------------------------------- gRPC

// GRPC_NAMES are gRPC's names of the grpc-status codes, by code; the API
// counts any other value under "other".
const GRPC_NAMES = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
  "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
  "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"];

// GRPC_SERVER are the codes that say the server side failed (those a
// gateway turns into a 5xx), as opposed to what the caller asked.
const GRPC_SERVER = new Set([2, 4, 12, 13, 14, 15]);

// grpcStatuses lists the non-zero counts of an API "grpc" object, by
// code, "other" last: [{code, name, n, kind}].
function grpcStatuses(g) {
  const out = [];
  for (const [code, n] of Object.entries(g || {})) {
    if (!(n > 0)) continue;
    const c = code === "other" ? 99 : Number(code);
    const name = GRPC_NAMES[c] || "other";
    const kind = c === 0 ? "g-ok" : GRPC_SERVER.has(c) ? "g-bad" : "g-warn";
    out.push({ c, code, name, n, kind });
  }
  return out.sort((a, b) => a.c - b.c);
}

function hasGRPC(g) {
  return grpcStatuses(g).length > 0;
}

// showGRPC fills e with a chip per status of the API's "grpc" object g;
// only on a change.
function showGRPC(e, g) {
  const list = grpcStatuses(g);
  const key = list.map((s) => s.code + ":" + s.n).join(" ");
  if (e.dataset.shown === key) return;
  e.dataset.shown = key;
  e.replaceChildren();
  for (const s of list) {
    const chip = e.appendChild(el("span", "gs " + s.kind, s.name + " " + fmt.int(s.n)));
    chip.dataset.grpcStatus = s.code;
    chip.title = s.code === "other" ? `${fmt.int(s.n)} with a grpc-status gRPC does not define` :
      `grpc-status ${s.code} ${s.name}: ${fmt.int(s.n)} ${s.n === 1 ? "response" : "responses"}`;
  }
}

// --------------------------------------------------------------- DOM

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = text;
  return e;
}

function svgEl(tag, className) {
  const e = document.createElementNS(SVG_NS, tag);
  if (className) e.setAttribute("class", className);
  return e;
}

// setText and setClass touch the DOM only on a change, so that a page
// redrawn every second does not relayout what did not move.
function setText(e, s) {
  if (e.textContent !== s) e.textContent = s;
}
function setClass(e, c) {
  if (e.getAttribute("class") !== c) e.setAttribute("class", c);
}
function setTitle(e, s) {
  if (e.title !== s) e.title = s;
}

// ------------------------------------------------------------ charts

// A series is a list of {t, v}: t in seconds (relay's clock), v a number
// or null, which breaks the line (a poll that failed, a counter reset).
function pushPoint(series, t, v) {
  series.push({ t, v });
  while (series.length && series[0].t < t - SPAN_S - 2) series.shift();
}

// Plot draws series into an SVG whose viewBox is its drawing size; the
// SVG stretches horizontally, and CSS keeps its lines a pixel wide.
class Plot {
  constructor(svg, grid) {
    const vb = svg.viewBox.baseVal;
    this.w = vb.width;
    this.h = vb.height;
    this.pad = grid ? 6 : 2;
    if (grid) this.grid = svg.appendChild(svgEl("path", "grid"));
    this.area = svg.appendChild(svgEl("path", "area"));
    this.line = svg.appendChild(svgEl("path", "line"));
  }

  // draw plots the last SPAN_S seconds before tNow on a scale of 0 to
  // top, and returns the y of top and of half of it (for labels).
  draw(series, tNow, top) {
    const { w, h, pad } = this;
    const x = (t) => (w * (1 - (tNow - t) / SPAN_S)).toFixed(1);
    const y = (v) => (h - pad - (Math.min(v, top) / top) * (h - 2 * pad)).toFixed(1);
    let line = "", area = "", seg = [];
    const flush = () => {
      if (seg.length === 0) return;
      if (seg.length === 1) seg.push({ t: seg[0].t + 0.25, v: seg[0].v }); // a lone point still shows
      line += "M" + seg.map((p) => x(p.t) + " " + y(p.v)).join("L");
      area += "M" + x(seg[0].t) + " " + h + "L" + seg.map((p) => x(p.t) + " " + y(p.v)).join("L") +
        "L" + x(seg[seg.length - 1].t) + " " + h + "Z";
      seg = [];
    };
    for (const p of series) {
      if (p.t < tNow - SPAN_S - 1) continue;
      if (p.v == null) flush(); else seg.push(p);
    }
    flush();
    this.line.setAttribute("d", line);
    this.area.setAttribute("d", area);
    if (this.grid) {
      const yt = pad, ym = (h / 2).toFixed(1);
      this.grid.setAttribute("d", `M0 ${yt}H${w}M0 ${ym}H${w}M0 ${h - pad}H${w}`);
    }
  }
}

function seriesMax(series, tNow) {
  let m = 0;
  for (const p of series) if (p.v != null && p.t >= tNow - SPAN_S && p.v > m) m = p.v;
  return m;
}

// A big chart of a total, with its scale written beside its grid lines.
class Chart {
  constructor(figure, format) {
    this.plot = new Plot(figure.querySelector("svg"), true);
    this.top = figure.querySelector(".y-top");
    this.mid = figure.querySelector(".y-mid");
    this.now = figure.querySelector(".now");
    this.format = format;
  }
  draw(series, tNow, current) {
    const top = niceCeil(seriesMax(series, tNow) * 1.05);
    this.plot.draw(series, tNow, top);
    setText(this.top, this.format(top));
    setText(this.mid, this.format(top / 2));
    setText(this.now, "now " + this.format(current));
  }
}

// A sparkline: no scale, just the shape, scaled to its own maximum.
function drawSpark(plot, series, tNow) {
  const m = seriesMax(series, tNow);
  plot.draw(series, tNow, m > 0 ? m * 1.1 : 1);
}

// ------------------------------------------------------------ state

const samples = [];                 // recent polls: {t, data}, oldest first
const totals = { rps: [], p99: [] }; // series of the totals
const rows = new Map();             // rowKey(pool, name) -> row (see makeRow)
const heads = new Map();            // pool name -> its heading row
let polls = 0;                      // successful polls
let failing = false;                // the last poll failed
let lastOK = 0;                     // Date.now() of the last good poll

const charts = {
  rps: new Chart($("chart-rps"), (v) => fmt.rate(v) + "/s"),
  p99: new Chart($("chart-p99"), fmt.dur),
};

// reference picks the poll to difference the newest against: the newest
// one at least MIN_WINDOW_S older, so that an extra poll (after a button)
// does not make a rate of a tenth of a second; else the oldest.
function reference(cur) {
  for (let i = samples.length - 2; i >= 0; i--) {
    if (cur.t - samples[i].t >= MIN_WINDOW_S) return samples[i];
  }
  return samples.length > 1 && samples[0].t < cur.t ? samples[0] : null;
}

// ------------------------------------------------------------- rows

const BUTTONS = [
  { action: "drain", label: "Drain", title: "Stop sending new requests to this backend; requests in flight finish" },
  { action: "enable", label: "Enable", title: "Put this backend back in rotation (clears drain and disable)" },
];

// rowKey names a backend's row: one address in two pools is two rows.
function rowKey(pool, name) {
  return pool + " " + name;
}

function makeRow(pool, name) {
  const tr = el("tr");
  tr.dataset.backend = name;
  tr.dataset.pool = pool;
  const cell = (cls) => tr.appendChild(el("td", cls));
  const row = { pool, name, tr, busy: false, last: null, rps: [], p99: [] };

  row.nameCell = cell("name");
  row.nameCell.textContent = name;
  row.nameCell.title = name;
  row.badge = cell("state").appendChild(el("span", "badge"));
  row.health = cell("health").appendChild(el("span", "ind"));
  row.breaker = cell("breaker").appendChild(el("span", "ind"));
  const weight = cell("num weight");
  row.weight = weight.appendChild(el("span", "v"));
  row.weightCfg = weight.appendChild(el("span", "cfg"));
  row.inflight = cell("num inflight");

  const sparkCell = (kind) => {
    const wrap = cell("num spark-cell " + kind).appendChild(el("div", "sc"));
    const svg = wrap.appendChild(svgEl("svg", "spark " + kind));
    svg.setAttribute("viewBox", "0 0 84 24");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("aria-hidden", "true");
    return { plot: new Plot(svg, false), value: wrap.appendChild(el("span", "v")) };
  };
  row.rpsCell = sparkCell("rps");
  row.err = cell("num err");
  row.p50 = cell("num p50");
  row.p99Cell = sparkCell("p99");

  // The gRPC statuses the backend answered, on a line of their own under
  // its row, there only when it answered some (render places it).
  row.grpcTr = el("tr", "grpc-row");
  row.grpcTr.dataset.grpcPool = pool;
  row.grpcTr.dataset.grpcBackend = name;
  const g = row.grpcTr.appendChild(el("td", "grpc"));
  g.colSpan = 11;
  g.appendChild(el("span", "grpc-label", "gRPC"));
  row.grpc = g.appendChild(el("span", "grpc-list"));

  const actions = cell("actions");
  row.buttons = {};
  for (const b of BUTTONS) {
    const button = actions.appendChild(el("button", "btn " + b.action, b.label));
    button.type = "button";
    button.dataset.action = b.action;
    button.title = b.title;
    button.addEventListener("click", () => act(row, b.action));
    row.buttons[b.action] = button;
  }
  return row;
}

// updateButtons offers what makes sense for the backend's state: Drain
// while it takes traffic, Enable once it was drained or disabled; and
// neither while an action is on its way.
function updateButtons(row) {
  const b = row.last;
  const out = b && (b.draining || b.drained || b.disabled);
  row.buttons.drain.disabled = row.busy || !b || b.draining || b.disabled;
  row.buttons.enable.disabled = row.busy || !out;
}

function breakerText(b, tNow) {
  if (b.breaker === "open" && b.ejected_until) {
    const left = Math.ceil(Date.parse(b.ejected_until) / 1000 - tNow);
    return left > 0 ? `open · ${left} s` : "open";
  }
  return b.breaker || DASH;
}

// updateRow shows backend b, d its change since the reference poll.
function updateRow(row, b, d, tNow) {
  row.last = b;
  const grpc = hasGRPC(b.grpc);
  setClass(row.tr, "st-" + b.state + (grpc ? " with-grpc" : ""));
  setClass(row.grpcTr, "grpc-row st-" + b.state);
  showGRPC(row.grpc, b.grpc);
  setText(row.badge, b.state);
  setClass(row.badge, "badge s-" + b.state);
  setTitle(row.badge, b.in_rotation ? "in rotation: new requests may go here" : "not in rotation: no new requests go here");

  setText(row.health, b.healthy ? "passing" : "failing");
  setClass(row.health, "ind " + (b.healthy ? "ok" : "bad"));
  setTitle(row.health, "active health checks " + (b.healthy ? "pass" : "fail"));

  setText(row.breaker, breakerText(b, tNow));
  setClass(row.breaker, "ind " + (b.breaker === "closed" ? "quiet" : b.breaker === "open" ? "bad" : "warn"));
  setTitle(row.breaker, "circuit breaker " + b.breaker + (b.ejected_until ? ", ejected until " + new Date(b.ejected_until).toLocaleTimeString("en-GB", { hour12: false }) : ""));

  setText(row.weight, String(b.weight));
  const changed = b.configured_weight != null && b.configured_weight !== b.weight;
  setText(row.weightCfg, changed ? ` (${b.configured_weight})` : "");
  setTitle(row.weightCfg.parentNode, changed ? `weight ${b.weight}, configured ${b.configured_weight}` : "");
  setText(row.inflight, fmt.int(b.in_flight));

  setText(row.rpsCell.value, fmt.rate(d.rps));
  setTitle(row.rpsCell.value.parentNode, fmt.int(b.requests) + " requests answered in all");
  setText(row.err, fmt.share(d.errShare));
  setClass(row.err, "num err" + severity(d.errShare));
  setText(row.p50, fmt.dur(d.p50));
  setText(row.p99Cell.value, fmt.dur(d.p99));
  updateButtons(row);
}

// severity is the class an error share earns: any 5xx is worth a look,
// one in a hundred is bad.
function severity(share) {
  return share >= 0.01 ? " bad" : share > 0 ? " warn" : "";
}

async function act(row, action) {
  const label = action === "drain" ? "Drain" : "Enable";
  row.busy = true;
  updateButtons(row);
  try {
    await api(`/api/pools/${encodeURIComponent(row.pool)}/backends/${encodeURIComponent(row.name)}/${action}`, "POST");
    hideError();
  } catch (e) {
    const why = e.status === 0 ? "relay unreachable (" + e.message + ")" : e.message + (e.status ? ` (HTTP ${e.status})` : "");
    showError(`${label} ${row.name} (pool ${row.pool}): ${why}`);
  } finally {
    row.busy = false;
    updateButtons(row);
  }
  poll(); // show the outcome now rather than in up to a second
}

function showError(msg) {
  setText($("error-text"), msg);
  $("error").hidden = false;
}
function hideError() {
  $("error").hidden = true;
}

// makeHead is the row that names a pool above its backends.
function makeHead(pool) {
  const tr = el("tr", "pool-head");
  tr.dataset.poolHead = pool;
  const th = tr.appendChild(el("th"));
  th.colSpan = 11;
  th.scope = "rowgroup";
  const name = th.appendChild(el("span", "pool-name"));
  th.appendChild(document.createTextNode(" "));
  const about = th.appendChild(el("span", "muted pool-about"));
  // relay's own gRPC answers in the pool: no backend took those calls.
  const grpc = th.appendChild(el("span", "muted pool-grpc"));
  grpc.hidden = true;
  const grpcLabel = grpc.appendChild(el("span"));
  const grpcList = grpc.appendChild(el("span"));
  return { tr, name, about, grpc, grpcLabel, grpcList };
}

// algorithmText is a pool's algorithm, saying so when it ignores the
// weights its members have.
function algorithmText(p) {
  if (!p.algorithm) return "";
  return p.weights_ignored ? p.algorithm + " (ignores the weights)" : p.algorithm;
}

// combine turns GET /api/pools into what the page draws: relay's totals
// (each pool's summed; connections are relay's own, the same in every
// pool), every pool's backends, each knowing its pool, and the pools.
function combine(data) {
  const pools = Array.isArray(data.pools) ? data.pools : [];
  const out = { generation: data.generation, processes: data.processes, time: data.time, pools, backends: [], queued: 0, totals: null };
  for (const p of pools) {
    out.queued += p.queued || 0;
    for (const b of Array.isArray(p.backends) ? p.backends : []) out.backends.push(Object.assign({ pool: p.pool }, b));
    out.totals = addTotals(out.totals, p.totals || {});
  }
  out.totals = out.totals || {};
  return out;
}

// addTotals adds pool totals t to sum (null: none yet) and returns it.
function addTotals(sum, t) {
  if (!sum) return JSON.parse(JSON.stringify(t));
  for (const k of ["requests", "bytes_in", "bytes_out", "in_flight", "retries", "retry_budget_refusals", "no_backend"]) {
    if (typeof t[k] === "number") sum[k] = (sum[k] || 0) + t[k];
  }
  for (const [k, v] of Object.entries(t.responses || {})) {
    sum.responses = sum.responses || {};
    sum.responses[k] = (sum.responses[k] || 0) + v;
  }
  const a = sum.latency, b = t.latency;
  if (a && b && sameBounds(a.bounds, b.bounds) && a.counts.length === b.counts.length) {
    a.counts = a.counts.map((n, i) => n + b.counts[i]);
    a.sum_seconds += b.sum_seconds;
  }
  return sum;
}

// ------------------------------------------------------------ render

function render(cur, ref) {
  const data = cur.data;
  const tNow = cur.t;
  const dt = ref ? cur.t - ref.t : 0;
  const old = ref ? ref.data : null;
  const backends = Array.isArray(data.backends) ? data.backends : [];

  // Header: the pool and its algorithm when there is one, else how many.
  const pools = Array.isArray(data.pools) ? data.pools : [];
  const meta = [];
  if (pools.length === 1) {
    meta.push("pool " + pools[0].pool);
    if (pools[0].algorithm) meta.push(algorithmText(pools[0]));
  } else {
    meta.push(plural(pools.length, "pool", "pools"));
  }
  if (data.processes != null) meta.push(plural(data.processes, "process", "processes"));
  if (data.generation != null) meta.push("configuration " + data.generation);
  setText($("meta"), meta.join(" · "));
  $("meta").title = pools.flatMap((p) => (p.warnings || []).map((w) => "pool " + p.pool + ": " + w)).join("\n");

  // Totals.
  const t = data.totals || {};
  const d = change(t, old && old.totals, dt);
  setText($("t-rps"), fmt.rate(d.rps));
  setText($("t-rps-sub"), fmt.int(t.requests) + " in all");
  setText($("t-err"), fmt.share(d.errShare));
  setClass($("t-err"), "value" + severity(d.errShare));
  setText($("t-err-sub"), d.errRate == null ? "" : fmt.rate(d.errRate) + " 5xx/s");
  setText($("t-p50"), fmt.dur(d.p50));
  setText($("t-p50-sub"), d.mean == null ? "" : "mean " + fmt.dur(d.mean));
  setText($("t-p99"), fmt.dur(d.p99));
  setText($("t-p99-sub"), dt > 0 ? "over the last " + dt.toFixed(1) + " s" : "");
  const inFlight = typeof t.in_flight === "number" ? t.in_flight : backends.reduce((s, b) => s + (b.in_flight || 0), 0);
  setText($("t-inflight"), fmt.int(inFlight));
  const inRotation = backends.filter((b) => b.in_rotation).length;
  setText($("t-inflight-sub"), data.processes == null ? "" : "in " + plural(data.processes, "process", "processes"));
  setText($("t-conns"), fmt.int(t.connections_open));
  setText($("t-conns-sub"), t.connections_accepted == null ? "" : fmt.int(t.connections_accepted) + " accepted");
  setText($("t-queued"), fmt.int(data.queued));
  setClass($("t-queued"), "value" + (data.queued > 0 ? " warn" : ""));
  const noBackend = typeof t.no_backend === "object" && t.no_backend ? t.no_backend.requests : t.no_backend;
  setText($("t-queued-sub"), noBackend == null ? "" : fmt.int(noBackend) + " without a backend");
  const retries = old && old.totals && t.retries >= old.totals.retries && dt > 0 ? (t.retries - old.totals.retries) / dt : null;
  setText($("t-retries"), fmt.rate(retries));
  setText($("t-retries-sub"), t.retries == null ? "" : fmt.int(t.retries) + " in all" +
    (t.retry_budget_refusals ? ", " + fmt.int(t.retry_budget_refusals) + " refused" : ""));

  pushPoint(totals.rps, tNow, d.rps);
  pushPoint(totals.p99, tNow, d.p99);
  charts.rps.draw(totals.rps, tNow, d.rps);
  charts.p99.draw(totals.p99, tNow, d.p99);

  // Backends, pool by pool in the API's order, each pool's under a row
  // that names it; a row lives as long as its backend so that a button
  // being clicked is never replaced under the pointer.
  const before = new Map((old && Array.isArray(old.backends) ? old.backends : []).map((b) => [rowKey(b.pool, b.name), b]));
  const tbody = document.querySelector("#backends tbody");
  const seen = new Set();
  const seenPools = new Set();
  let i = 0;
  const place = (tr) => {
    if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    i++;
  };
  for (const p of pools) {
    seenPools.add(p.pool);
    let head = heads.get(p.pool);
    if (!head) heads.set(p.pool, head = makeHead(p.pool));
    const members = Array.isArray(p.backends) ? p.backends : [];
    const up = members.filter((b) => b.in_rotation).length;
    setText(head.name, p.pool);
    setText(head.about, [algorithmText(p), `${up} of ${members.length} in rotation`].filter(Boolean).join(" · "));
    setTitle(head.about, (p.warnings || []).join("\n"));
    const own = (p.totals || {}).no_backend_grpc;
    // Empty while hidden, so the row's text is the pool's alone.
    head.grpc.hidden = !hasGRPC(own);
    setText(head.grpcLabel, head.grpc.hidden ? "" : "gRPC answered by relay:");
    showGRPC(head.grpcList, own);
    place(head.tr);
    for (const b of members) {
      const key = rowKey(p.pool, b.name);
      seen.add(key);
      let row = rows.get(key);
      if (!row) rows.set(key, row = makeRow(p.pool, b.name));
      const bd = change(b, before.get(key), dt);
      pushPoint(row.rps, tNow, bd.rps);
      pushPoint(row.p99, tNow, bd.p99);
      updateRow(row, b, bd, tNow);
      drawSpark(row.rpsCell.plot, row.rps, tNow);
      drawSpark(row.p99Cell.plot, row.p99, tNow);
      place(row.tr);
      if (hasGRPC(b.grpc)) place(row.grpcTr);
      else row.grpcTr.remove();
    }
  }
  for (const [key, row] of rows) {
    if (!seen.has(key)) {
      row.tr.remove();
      row.grpcTr.remove();
      rows.delete(key);
    }
  }
  for (const [name, head] of heads) {
    if (!seenPools.has(name)) {
      head.tr.remove();
      heads.delete(name);
    }
  }
  $("empty").hidden = backends.length > 0;
  setText($("rotation"), backends.length ? `${inRotation} of ${backends.length} in rotation` : "");

  // For whoever reads the page mechanically: which poll is on screen.
  document.body.dataset.time = data.time || "";
  document.body.dataset.polls = String(polls);
}

// ------------------------------------------------------------- poll

let timer = 0;
let polling = false;
let again = false;

async function poll() {
  if (polling) {
    again = true; // one more as soon as this one is done
    return;
  }
  clearTimeout(timer);
  polling = true;
  const started = performance.now();
  try {
    const data = await api("/api/pools");
    received(combine(data));
  } catch (e) {
    unreachable(e);
  } finally {
    polling = false;
  }
  if (again) {
    again = false;
    poll();
    return;
  }
  timer = setTimeout(poll, Math.max(0, POLL_MS - (performance.now() - started)));
}

function received(data) {
  // Relay's clock, not ours, measures the window: the poll's round trip
  // and the browser's timer jitter do not count.
  let t = Date.parse(data.time) / 1000;
  if (!isFinite(t)) t = Date.now() / 1000;
  const cur = { t, data };
  const last = samples[samples.length - 1];
  if (last && t === last.t) {
    // The same counters again (two polls within relay's clock tick):
    // nothing to difference; keep what is shown.
    markLive(t);
    return;
  }
  const restarted = last && (t < last.t || (data.totals && last.data.totals && data.totals.requests < last.data.totals.requests));
  if (restarted) {
    // A new relay (or a clock step): the old counters mean nothing now.
    samples.length = 0;
    for (const s of [totals.rps, totals.p99]) pushPoint(s, t, null);
  }
  samples.push(cur);
  while (samples.length > 2 && samples[0].t < t - KEEP_S) samples.shift();
  polls++;
  render(cur, reference(cur));
  markLive(t);
}

function markLive(t) {
  lastOK = Date.now();
  if (failing) {
    failing = false;
    document.body.classList.remove("stale");
    $("unreachable").hidden = true;
  }
  setClass($("status"), "status ok");
  setText($("status-text"), "live · " + fmt.clock(t));
}

function unreachable(e) {
  const gone = e.status === 0;
  const what = gone ? "relay unreachable" : `relay answered ${e.status}`;
  let msg = what + ": " + e.message;
  msg += lastOK ? ` — showing the data of ${new Date(lastOK).toLocaleTimeString("en-GB", { hour12: false })}; retrying every second.` : " — retrying every second.";
  setText($("unreachable"), msg);
  $("unreachable").hidden = false;
  setClass($("status"), "status bad");
  setText($("status-text"), gone ? "relay unreachable" : "error " + e.status);
  if (!failing) {
    failing = true;
    document.body.classList.add("stale");
    // Break the lines: what happened while we could not look is unknown.
    const last = samples[samples.length - 1];
    if (last) {
      const t = last.t + 0.5;
      for (const s of [totals.rps, totals.p99]) pushPoint(s, t, null);
      for (const row of rows.values()) {
        pushPoint(row.rps, t, null);
        pushPoint(row.p99, t, null);
      }
    }
  }
}

$("error-dismiss").addEventListener("click", hideError);
window.addEventListener("hashchange", () => {
  token = tokenFromHash();
  poll();
});

poll();
