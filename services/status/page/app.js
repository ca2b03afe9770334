// The status page: polls api/cluster and renders tables and SVG lag sparklines.
// No framework, no build step, nothing fetched from outside this server.
"use strict";

const POLL_MS = 3000;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const c of children) {
    node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  }
  return node;
}

function seconds(s) {
  if (s == null) return "–";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function bytes(n) {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}

function rate(r) { return r == null ? "–" : r.toFixed(1) + "/s"; }

function clock(t) { return t == null ? "–" : new Date(t * 1000).toLocaleTimeString(); }

function state(s) { return el("span", { class: "state " + s }, s); }

function cell(value, cls) { return el("td", cls ? { class: cls } : {}, value); }

// A sparkline of one series over the shared time axis: an SVG polyline, max label at the end.
function sparkline(times, values) {
  const w = 160, h = 28;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w + 70);
  svg.setAttribute("height", h);
  const points = [];
  const t0 = times[0], t1 = times[times.length - 1];
  const present = (values || []).filter((v) => v != null);
  const max = Math.max(1, ...present);
  (values || []).forEach((v, i) => {
    if (v == null) return;
    const x = t1 > t0 ? ((times[i] - t0) / (t1 - t0)) * w : w;
    points.push(x.toFixed(1) + "," + (h - 2 - (v / max) * (h - 4)).toFixed(1));
  });
  if (points.length === 0) {
    const text = document.createElementNS(svg.namespaceURI, "text");
    text.setAttribute("x", 0); text.setAttribute("y", h / 2 + 4);
    text.setAttribute("class", "empty"); text.textContent = "no data";
    svg.append(text);
    return svg;
  }
  const line = document.createElementNS(svg.namespaceURI, "polyline");
  line.setAttribute("points", points.join(" "));
  svg.append(line);
  const label = document.createElementNS(svg.namespaceURI, "text");
  label.setAttribute("x", w + 4); label.setAttribute("y", 12);
  label.setAttribute("font-size", "10"); label.textContent = "max " + seconds(max);
  svg.append(label);
  return svg;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// The Spark job's progress (the drainer's CatchUp.job): rows done/total, percent, rate, ETA.
function jobProgress(j) {
  let text = "job " + j.rows_done.toLocaleString("en");
  if (j.rows_total != null) text += "/" + j.rows_total.toLocaleString("en");
  if (j.percent != null) text += " (" + Math.floor(j.percent) + "%)";
  if (j.rate != null) text += ", " + Math.round(j.rate).toLocaleString("en") + " rows/s";
  if (j.rows_total != null && j.rows_done >= j.rows_total) text += ", done";
  else if (j.eta_s != null) text += ", ETA " + seconds(j.eta_s);
  return text;
}

function catchup(c) {
  if (!c) return "–";
  let text = c.state;
  if (c.rows) text += ", " + c.rows + " rows";
  if (c.rows_caught_up) text += " (" + c.rows_caught_up + " in all)";
  if (c.job && ["running", "finishing", "failed"].includes(c.state)) {
    text += " — " + jobProgress(c.job);
  }
  return text;
}

function render(doc) {
  const times = doc.history.time;
  const series = doc.history.series;
  const newest = Math.max(0, ...doc.pumps.map((p) => p.max_commit_time || 0));
  fill(document.querySelector("#pumps tbody"), doc.pumps.map((p) =>
    el("tr", { "data-node": p.id, "data-state": p.state },
      cell(p.id), cell(p.addr), el("td", {}, state(p.state)),
      cell(p.max_commit_ts, "num"),
      cell(p.max_commit_time ? seconds(newest - p.max_commit_time) : "–", "num"),
      cell(bytes(p.disk_available_bytes), "num"), cell(rate(p.write_rate), "num"),
      cell(p.error || "", "error"))));
  document.getElementById("pump-count").textContent =
    doc.pumps.filter((p) => p.state === "online").length + " online of " + doc.pumps.length;

  fill(document.querySelector("#drainers tbody"), doc.drainers.map((d) =>
    el("tr", { "data-node": d.id, "data-state": d.state, "data-lag": d.lag_seconds },
      cell(d.id), el("td", {}, state(d.state)),
      cell(clock(d.checkpoint_time), "num"),
      cell(seconds(d.lag_seconds), "num lag"),
      el("td", {}, sparkline(times, series["drainer/" + d.id])),
      cell(rate(d.apply_rate), "num"), cell(d.sink || "–"), cell(catchup(d.catchup)),
      cell(d.error || "", "error"))));
  document.getElementById("drainer-count").textContent =
    doc.drainers.filter((d) => d.state === "online").length + " online of " + doc.drainers.length;

  const cdc = document.getElementById("cdc");
  cdc.replaceChildren(...doc.cdc.flatMap((c) => clusterView(c, times, series)));
  document.getElementById("updated").textContent = "sampled " + clock(doc.time);
}

function table(cls, headers, rows) {
  const head = el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h))));
  return el("table", { class: cls }, head, el("tbody", {}, ...rows));
}

function clusterView(c, times, series) {
  const captures = c.captures.map((k) =>
    el("tr", { "data-capture": k.id },
      cell(k.id), cell(k.address), cell(k.version), cell(clock(k.start_time)),
      cell(k.is_owner ? "owner" : "processor")));
  const feeds = c.changefeeds.map((f) => {
    const name = "changefeed/" + c.cluster + "/" + f.namespace + "/" + f.id;
    return el("tr", { "data-changefeed": f.id, "data-state": f.state, "data-lag": f.lag_seconds },
      cell(f.namespace + "/" + f.id), el("td", {}, state(f.state)),
      cell(clock(f.checkpoint_time), "num"), cell(seconds(f.lag_seconds), "num"),
      el("td", {}, sparkline(times, series[name])),
      cell(f.sink_uri), cell(f.error || "", "error"));
  });
  return [
    el("h2", {}, "Capture cluster \u201c" + c.cluster + "\u201d ",
      el("span", { class: "muted" }, "owner: " + (c.owner || "none"))),
    table("captures", ["capture", "address", "version", "started", "role"], captures),
    el("h2", {}, "Changefeeds"),
    table("changefeeds",
      ["changefeed", "state", "checkpoint", "lag", "lag, last hour", "sink", "error"], feeds),
  ];
}

async function poll() {
  const problem = document.getElementById("problem");
  try {
    const r = await fetch("api/cluster", { cache: "no-store" });
    const doc = await r.json();
    if (!r.ok) throw new Error(doc.error || r.statusText);
    render(doc);
    problem.hidden = true;
    document.body.dataset.samples = times_count(doc);
  } catch (e) {
    problem.textContent = "cannot refresh: " + e.message;
    problem.hidden = false;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

function times_count(doc) { return String(doc.history.time.length); }

poll();
