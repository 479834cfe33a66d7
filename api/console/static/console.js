// Tidelake console: plain JavaScript over the admin API (/api/v1/...), no CDN.
"use strict";
const API = "../api/v1";
const view = document.getElementById("view");
const COLORS = ["#1f6feb", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#0a7f8f"];

function esc(v) {
  return String(v === null || v === undefined ? "" : v)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
function num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0; let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v : v.toFixed(1)) + " " + units[i];
}
function ms(n) {
  if (n === null || n === undefined) return "–";
  if (n < 0) return "forever";
  if (n < 1000) return n + " ms";
  const s = n / 1000;
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}
function when(t) {
  if (t === null || t === undefined || t < 0) return "–";
  const d = new Date(t);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}
async function get(path) {
  const res = await fetch(API + path);
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = (await res.json()).detail || detail; } catch (e) { /* not JSON */ }
    throw new Error(res.status + " " + detail);
  }
  return res.json();
}
function table(id, headers, rows) {
  const head = headers.map(h => {
    const [label, cls] = Array.isArray(h) ? h : [h, ""];
    return `<th class="${cls}">${esc(label)}</th>`;
  }).join("");
  const body = rows.length ? rows.map(r => "<tr>" + r.join("") + "</tr>").join("")
    : `<tr><td colspan="${headers.length}" class="muted">none</td></tr>`;
  return `<div class="scroll"><table id="${id}"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}
const td = (v, cls) => `<td class="${cls || ""}">${v}</td>`;
const tn = v => td(esc(num(v)), "num");
const link = (href, text) => `<a href="${esc(href)}">${esc(text)}</a>`;
function unreachableNote(nodes, what) {
  if (!nodes || !nodes.length) return "";
  return `<p id="unreachable" class="error">broker${nodes.length > 1 ? "s" : ""} ${esc(nodes.join(", "))} did not answer: ${esc(what)}</p>`;
}
function panel(title, inner, id) {
  return `<section class="panel"${id ? ` id="${id}"` : ""}><h2>${esc(title)}</h2>${inner}</section>`;
}

function tick(v) {
  if (v >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (v >= 1e4) return (v / 1e3).toFixed(0) + "k";
  return v >= 10 ? num(Math.round(v)) : String(Math.round(v * 10) / 10);
}

// An SVG line chart of several series over time: series = [{name, points: [[t, v], ...]}].
function chart(id, series, unit) {
  const W = 900, H = 220, L = 60, R = 10, T = 10, B = 24;
  const pts = series.flatMap(s => s.points);
  const legend = series.map((s, i) =>
    `<span style="color:${COLORS[i % COLORS.length]}">■ ${esc(s.name)}</span>`).join("");
  if (!pts.length) {
    return `<svg id="${id}" class="chart" viewBox="0 0 ${W} ${H}" role="img"><text x="${W / 2}" y="${H / 2}" text-anchor="middle">no samples yet</text></svg>`;
  }
  const t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]), t0 + 1);
  const vmax = Math.max(...pts.map(p => p[1]), 1);
  const x = t => L + (t - t0) / (t1 - t0) * (W - L - R);
  const y = v => T + (1 - v / vmax) * (H - T - B);
  const lines = series.map((s, i) =>
    `<polyline data-series="${esc(s.name)}" stroke="${COLORS[i % COLORS.length]}" points="${
      s.points.map(p => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ")}"/>`).join("");
  const ticks = [0, 0.5, 1].map(f =>
    `<line class="axis" x1="${L}" x2="${W - R}" y1="${y(vmax * f)}" y2="${y(vmax * f)}"/>` +
    `<text x="${L - 4}" y="${y(vmax * f) + 3}" text-anchor="end">${esc(tick(vmax * f))}${esc(unit)}</text>`).join("");
  const times = `<text x="${L}" y="${H - 6}">${esc(new Date(t0).toISOString().slice(11, 19))}</text>` +
    `<text x="${W - R}" y="${H - 6}" text-anchor="end">${esc(new Date(t1).toISOString().slice(11, 19))} UTC</text>`;
  return `<div class="legend">${legend}</div><svg id="${id}" class="chart" viewBox="0 0 ${W} ${H}" role="img">${ticks}${times}${lines}</svg>`;
}

function field(f) {
  if (f.format === "null") return `<span class="muted">null</span>`;
  const tag = f.schema_id !== null && f.schema_id !== undefined
    ? `${f.format} · schema ${f.schema_id}${f.subject ? " (" + f.subject + ")" : ""}` : f.format;
  const err = f.error ? ` <span class="error">${esc(f.error)}</span>` : "";
  return `<span class="fmt">${esc(tag)}</span>${esc(f.text)}${err}`;
}

// --- pages ---------------------------------------------------------------------------
async function topicsPage() {
  const topics = await get("/topic-summaries");
  const rows = topics.map(t => [
    td(link("#/topics/" + encodeURIComponent(t.name), t.name)), tn(t.partitions), tn(t.messages),
    td(esc(bytes(t.size_bytes)) + (t.size_partial ? ` <span class="muted" title="a leader did not answer: its partitions are not counted">(partial)</span>` : ""), "num"),
    td(esc(num(t.messages_per_s)) + " msg/s", "num"),
    td(esc(bytes(t.bytes_in_per_s)) + "/s", "num"),
    td(esc(ms(t.retention_ms)), "num"),
    td(t.table_topic ? `yes → ${link("#/tables", t.table)}` : "no"),
  ]);
  return `<h1 id="page-title">Topics</h1>` + panel(`${topics.length} topics`, table("topics-table",
    ["Topic", ["Partitions", "num"], ["Messages", "num"], ["Size", "num"], ["Rate", "num"], ["In", "num"],
     ["Retention", "num"], "Table topic"], rows));
}

async function topicPage(name, q) {
  const t = await get("/topics/" + encodeURIComponent(name) + "/detail");
  const parts = table("partitions-table",
    [["Partition", "num"], ["Leader", "num"], ["Start offset", "num"], ["End offset", "num"],
     ["Messages", "num"], ["Size", "num"]],
    t.partitions.map(p => [tn(p.partition), tn(p.leader), tn(p.log_start_offset), tn(p.high_watermark),
      tn(p.high_watermark === null || p.log_start_offset === null ? null : p.high_watermark - p.log_start_offset),
      td(p.size_bytes !== null ? esc(bytes(p.size_bytes)) : `<span class="muted" title="its leader did not answer">broker ${esc(p.leader)}: ?</span>`, "num")]));
  const configs = table("configs-table", ["Config", "Value", "Source"],
    Object.entries(t.configs).map(([k, v]) =>
      [td(esc(k)), td(esc(v)), td(t.overrides.includes(k) ? "<b>topic</b>" : `<span class="muted">default</span>`)]));
  const links = t.table ? `<p id="table-links">Table topic → table ${tableLink(t.table)} (${link("#/tables", "status")}), dead letters → ${
    link("#/topics/" + encodeURIComponent(t.dead_letter_topic), t.dead_letter_topic)}</p>` : "";
  const partition = Number(q.get("partition") || 0);
  const from = q.get("timestamp") ? "timestamp" : "offset";
  const params = new URLSearchParams({ partition: String(partition), limit: q.get("limit") || "50" });
  if (q.get("timestamp")) params.set("timestamp", String(Date.parse(q.get("timestamp")) || q.get("timestamp")));
  else if (q.get("offset")) params.set("offset", q.get("offset"));
  let page;
  try {
    page = await get("/topics/" + encodeURIComponent(name) + "/messages?" + params);
  } catch (e) {  // a partition led by another broker of the cluster
    page = { messages: [], start_offset: 0, next_offset: 0, high_watermark: null, error: e.message };
  }
  const msgs = (page.error ? `<p id="browse-error" class="muted">${esc(page.error)}</p>` : "") + table("messages-table",
    [["Offset", "num"], "Timestamp", "Key", "Value", "Headers"],
    page.messages.map(m => [tn(m.offset), td(esc(when(m.timestamp))), td(field(m.key), "wrap"),
      td(field(m.value), "wrap"),
      td(m.headers.map(h => esc(h.key) + "=" + field(h.value)).join("<br>"), "wrap")]));
  const opts = t.partitions.map(p =>
    `<option value="${p.partition}"${p.partition === partition ? " selected" : ""}>${p.partition}</option>`).join("");
  const form = `<form class="inline" id="browse-form">
    <label>Partition <select name="partition">${opts}</select></label>
    <label>From offset <input name="offset" type="number" min="0" value="${esc(q.get("offset") || "")}"></label>
    <label>or from time (UTC) <input name="timestamp" placeholder="2026-11-26T04:00:00Z" value="${esc(q.get("timestamp") || "")}"></label>
    <label>Limit <input name="limit" type="number" min="1" max="500" value="${esc(q.get("limit") || "50")}"></label>
    <button>Show</button></form>`;
  setTimeout(() => {
    const f = document.getElementById("browse-form");
    if (f) f.addEventListener("submit", ev => {
      ev.preventDefault();
      const p = new URLSearchParams();
      for (const [k, v] of new FormData(f)) if (v) p.set(k, String(v));
      location.hash = "#/topics/" + encodeURIComponent(name) + "?" + p;
    });
  });
  return `<h1 id="page-title">Topic ${esc(name)}</h1>${links}` +
    unreachableNote(t.unreachable_brokers, "their partitions' offsets are not shown") +
    `<div class="grid">${panel("Partitions", parts)}${panel("Configs", configs)}</div>` +
    panel(`Messages of partition ${partition} from ${from} (offsets ${num(page.start_offset)}–${num(page.next_offset - 1)} of ${num(page.high_watermark)})`,
      form + msgs, "message-browser");
}

async function groupsPage() {
  const listing = await get("/groups");
  const groups = listing.groups;
  return `<h1 id="page-title">Consumer groups</h1>` +
    unreachableNote(listing.unreachable_brokers, "the groups they coordinate may be missing or shown as Unknown") +
    panel(`${groups.length} groups`, table("groups-table",
    ["Group", "State", ["Members", "num"], "Topics", ["Coordinator", "num"], ["Lag", "num"]],
    groups.map(g => [td(link("#/groups/" + encodeURIComponent(g.group_id), g.group_id)), td(esc(g.state)),
      tn(g.members), td(esc(g.topics.join(", "))),
      td(esc(g.coordinator) + (g.coordinator_answered ? "" : ` <span class="error">(no answer)</span>`), "num"),
      tn(g.lag)])));
}

async function groupPage(id) {
  const [g, h] = await Promise.all([get("/groups/" + encodeURIComponent(id)), get("/history")]);
  const members = table("members-table", ["Member", "Client", "Host", "Assignment"],
    g.members.map(m => [td(esc(m.member_id)), td(esc(m.client_id)), td(esc(m.client_host)),
      td(esc(m.assignment.map(a => a.topic + " [" + a.partitions.join(", ") + "]").join("; ")))]));
  const offsets = table("offsets-table",
    ["Topic", ["Partition", "num"], ["Committed", "num"], ["End offset", "num"], ["Lag", "num"], "Member"],
    g.offsets.map(o => [td(link("#/topics/" + encodeURIComponent(o.topic), o.topic)), tn(o.partition),
      tn(o.committed), tn(o.high_watermark), tn(o.lag), td(esc(o.member_id || "–"))]));
  const series = [{ name: "lag of " + id,
    points: h.samples.filter(s => id in s.group_lag).map(s => [s.at_ms, s.group_lag[id]]) }];
  return `<h1 id="page-title">Group ${esc(id)}</h1>` +
    unreachableNote(g.unreachable_brokers, "members or end offsets they hold are not shown") +
    `<dl class="kv panel"><dt>State</dt><dd id="group-state">${esc(g.state)}</dd><dt>Protocol</dt><dd>${esc(g.protocol_type)} ${esc(g.protocol)}</dd>` +
    `<dt>Coordinator</dt><dd id="group-coordinator">broker ${esc(g.coordinator)}</dd>` +
    `<dt>Total lag</dt><dd id="group-lag">${esc(num(g.lag))}</dd></dl>` +
    panel("Lag per partition", offsets) + panel("Members", members) +
    panel("Lag over time", chart("lag-chart", series, ""));
}

async function schemasPage() {
  const subjects = await get("/schemas/subjects");
  return `<h1 id="page-title">Schemas</h1>` + panel(`${subjects.length} subjects`, table("subjects-table",
    ["Subject", "Type", "Versions", ["Latest id", "num"], "Compatibility"],
    subjects.map(s => [td(link("#/schemas/" + encodeURIComponent(s.subject), s.subject)), td(esc(s.schema_type)),
      td(esc(s.versions.join(", "))), tn(s.latest_id), td(esc(s.compatibility))])));
}

async function subjectPage(subject, q) {
  const subjects = await get("/schemas/subjects");
  const s = subjects.find(x => x.subject === subject);
  if (!s) throw new Error("subject " + subject + " not found");
  const v = Number(q.get("version") || s.versions[s.versions.length - 1]);
  const shown = await get(`/schemas/subjects/${encodeURIComponent(subject)}/versions/${v}`);
  const versions = s.versions.map(n =>
    n === v ? `<b>v${n}</b>` : link(`#/schemas/${encodeURIComponent(subject)}?version=${n}`, "v" + n)).join(" ");
  let diff = `<p class="muted">one version: nothing to compare</p>`;
  if (s.versions.length > 1) {
    const from = Number(q.get("from") || s.versions[s.versions.length - 2]);
    const to = Number(q.get("to") || s.versions[s.versions.length - 1]);
    const d = await get(`/schemas/subjects/${encodeURIComponent(subject)}/diff?from=${from}&to=${to}`);
    const opt = sel => s.versions.map(n => `<option${n === sel ? " selected" : ""}>${n}</option>`).join("");
    diff = `<form class="inline" id="diff-form"><label>From <select name="from">${opt(from)}</select></label>` +
      `<label>To <select name="to">${opt(to)}</select></label><button>Compare</button></form>` +
      `<pre id="schema-diff" class="diff">${d.lines.map(l =>
        `<div class="${l.op === "+" ? "add" : l.op === "-" ? "del" : ""}">${esc(l.op + " " + l.text)}</div>`).join("")}</pre>`;
    setTimeout(() => {
      const f = document.getElementById("diff-form");
      if (f) f.addEventListener("submit", ev => {
        ev.preventDefault();
        const p = new URLSearchParams(new FormData(f));
        location.hash = `#/schemas/${encodeURIComponent(subject)}?${p}`;
      });
    });
  }
  return `<h1 id="page-title">Subject ${esc(subject)}</h1>` +
    `<dl class="kv panel"><dt>Type</dt><dd>${esc(s.schema_type)}</dd><dt>Compatibility</dt><dd id="compatibility">${esc(s.compatibility)}</dd>` +
    `<dt>Versions</dt><dd id="versions">${versions}</dd><dt>Schema id</dt><dd>${esc(shown.id)}</dd></dl>` +
    panel(`Version ${v}`, `<pre id="schema-text">${esc(shown.schema_text)}</pre>`) +
    panel("Diff", diff);
}

function tableLink(name) {
  if (!name) return "–";
  const i = name.lastIndexOf(".");
  return link(`catalog/#/ns/${encodeURIComponent(name.slice(0, i))}/table/${encodeURIComponent(name.slice(i + 1))}`, name);
}

// table.topic.format: which tables a table topic writes
const FORMATS = { iceberg: "Iceberg", delta: "Delta", both: "Iceberg + Delta" };

async function tablesPage() {
  const [status, h, namespaces, topics] = await Promise.all([
    get("/table-topics"), get("/history"), get("/catalog/namespaces").catch(() => []),
    get("/topic-summaries")]);
  const dlq = Object.fromEntries(topics.map(t => [t.name, t.dead_letter_topic || t.name + ".dlq"]));
  const names = namespaces.map(n => n.name);
  const tables = (await Promise.all(names.map(ns =>
    get("/catalog/namespaces/" + encodeURIComponent(ns) + "/tables").then(ts => ts.map(t => [ns, t])).catch(() => []))))
    .flat();
  const tname = t => t.name;
  const statusRows = status.map(s => [
    td(link("#/topics/" + encodeURIComponent(s.topic), s.topic)),
    td(s.format === "delta" ? esc(s.table) : tableLink(s.table)), td(esc(FORMATS[s.format] || s.format)),
    td(esc(s.state)),
    tn(s.lag), td(esc(ms(s.freshness_ms)), "num"), tn(s.rows_per_second), tn(s.rows_committed),
    tn(s.commits), td(esc(s.files_per_commit === null ? "–" : Number(s.files_per_commit).toFixed(1)), "num"),
    td(s.dead_letters ? link("#/topics/" + encodeURIComponent(dlq[s.topic]), num(s.dead_letters)) : "0", "num"),
    td(s.last_error ? `<span class="error">${esc(s.last_error)}</span>` : "–", "wrap")]);
  const catalogRows = tables.map(([ns, t]) => [td(esc(ns)),
    td(link(`catalog/#/ns/${encodeURIComponent(ns)}/table/${encodeURIComponent(tname(t))}`, tname(t)))]);
  const fresh = status.map(s => ({ name: s.topic,
    points: h.samples.filter(x => x.table_freshness_ms[s.topic] !== null && x.table_freshness_ms[s.topic] !== undefined)
      .map(x => [x.at_ms, x.table_freshness_ms[s.topic] / 1000]) }));
  const rate = status.map(s => ({ name: s.topic,
    points: h.samples.filter(x => s.topic in x.table_rows_per_second).map(x => [x.at_ms, x.table_rows_per_second[s.topic]]) }));
  return `<h1 id="page-title">Tables</h1>` +
    panel("Table topics", table("table-topics-table",
      ["Topic", "Table", "Format", "State", ["Lag", "num"], ["Freshness", "num"], ["Rows/s", "num"], ["Rows", "num"],
       ["Commits", "num"], ["Files/commit", "num"], ["Dead letters", "num"], "Last error"], statusRows)) +
    `<div class="grid">${panel("Freshness (s)", chart("freshness-chart", fresh, " s"))}${panel("Rows/s", chart("rows-chart", rate, ""))}</div>` +
    panel(`${tables.length} tables in the catalog`, table("catalog-tables", ["Namespace", "Table"], catalogRows));
}

async function brokersPage() {
  const [c, h] = await Promise.all([get("/cluster?sample_ms=0"), get("/history")]);
  const rate = h.samples.length ? h.samples[h.samples.length - 1].bytes_in_per_s : 0;
  // in a cluster, every broker's last load report (bytes/s in and out of the
  // partitions it leads); a single broker shows its own produce rate
  const loads = (c.balancer && c.balancer.loads) || {};
  const inRate = b => b.node_id in loads ? loads[b.node_id].bytes_in_per_s
    : (b.node_id === c.node_id ? rate : null);
  const outRate = b => b.node_id in loads ? loads[b.node_id].bytes_out_per_s : null;
  const perS = v => v === null || v === undefined ? "–" : esc(bytes(v)) + "/s";
  const brokers = table("brokers-table",
    [["Node", "num"], "Host", "Rack", "State", ["Partitions led", "num"], ["In", "num"], ["Out", "num"]],
    c.brokers.map(b => [tn(b.node_id), td(esc(b.host + ":" + b.port)), td(esc(b.rack || "–")),
      td(b.live ? (b.draining ? "draining" : "live") : `<span class="error">down</span>`),
      tn(b.partitions), td(perS(inRate(b)), "num"), td(perS(outRate(b)), "num")]));
  const moves = table("moves-table", ["Topic", ["Partition", "num"], ["From", "num"], ["To", "num"]],
    c.moves_in_flight.map(m => [td(esc(m.topic)), tn(m.partition), tn(m.from), tn(m.to)]));
  const decisions = (c.balancer && c.balancer.decisions) || [];
  const decided = decisions.length
    ? `<ul id="balancer-decisions">${decisions.map(d => `<li>${esc(typeof d === "string" ? d : JSON.stringify(d))}</li>`).join("")}</ul>`
    : `<p id="balancer-decisions">none${c.clustered ? " by this broker" : ""}</p>`;
  const series = [{ name: "bytes in/s", points: h.samples.map(s => [s.at_ms, s.bytes_in_per_s]) }];
  return `<h1 id="page-title">Brokers</h1>` +
    `<dl class="kv panel"><dt>Cluster id</dt><dd>${esc(c.cluster_id)}</dd><dt>Mode</dt><dd>${c.clustered ? "cluster" : "single broker"}</dd>` +
    `<dt>Controller</dt><dd id="controller">${esc(c.controller)}</dd><dt>This node</dt><dd>${esc(c.node_id)}</dd></dl>` +
    panel(`${c.brokers.length} brokers`, brokers) + panel("Moves in flight", moves) +
    panel("Recent balancing decisions", decided) +
    panel("Bytes in/s (this broker)", chart("bytes-chart", series, " B/s"));
}

async function storageBadge() {
  const badge = document.getElementById("storage");
  try {
    const s = await get("/storage");
    badge.textContent = "object storage: " + s.state;
    badge.className = "badge " + s.state;
    if (s.state !== "healthy") badge.title = (s.last_error || "") + " error rate " + s.error_rate;
  } catch (e) { badge.textContent = "object storage: unknown"; }
}

async function route() {
  document.body.dataset.state = "loading";
  const [path, query] = (location.hash.slice(1) || "/topics").split("?");
  const q = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const page = parts[0] || "topics";
  for (const a of document.querySelectorAll("#nav a[data-page]")) {
    a.classList.toggle("active", a.dataset.page === page);
  }
  try {
    let html;
    if (page === "topics") html = parts[1] ? await topicPage(parts[1], q) : await topicsPage();
    else if (page === "groups") html = parts[1] ? await groupPage(parts[1]) : await groupsPage();
    else if (page === "schemas") html = parts[1] ? await subjectPage(parts[1], q) : await schemasPage();
    else if (page === "tables") html = await tablesPage();
    else if (page === "brokers") html = await brokersPage();
    else html = `<p class="error">no page ${esc(page)}</p>`;
    view.innerHTML = html;
  } catch (e) {
    view.innerHTML = `<h1 id="page-title">Error</h1><p id="error" class="error">${esc(e.message)}</p>`;
  }
  await storageBadge();
  document.body.dataset.state = "ready";
}
window.addEventListener("hashchange", route);
route();
