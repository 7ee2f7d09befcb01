// skyward dashboard: hand-written, no framework (skyward/observe/dashboard).
// Follows api/stream (server-sent events): "state" (every pool, summarised), "events"
// (new event lines of a pool) and "log" (new output lines of the node followed).
// Text from the pools (names, output lines, errors) goes into the page as text only.
"use strict";

const KEPT_EVENTS = 300;
const KEPT_LINES = 1000;
const params = new URLSearchParams(location.search);
let selected = params.get("pool") || "";
let followed = 0;
let pools = [];
let stream = null;
const eventsByPool = new Map();   // pool -> [{seq, time, level, text}]
const lastEventSeq = new Map();   // pool -> highest seq seen
let lastLogSeq = 0;

const $ = (id) => document.getElementById(id);

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "title") node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clock(seconds) {
  const time = new Date(seconds * 1000);
  return time.toLocaleTimeString([], { hour12: false });
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  seconds = Math.max(0, Math.round(seconds));
  const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m) return `${m}m ${String(s).padStart(2, "0")}s`;
  return `${s}s`;
}

function money(dollars) {
  return dollars >= 0.01 || dollars === 0 ? `$${dollars.toFixed(2)}` : `$${dollars.toFixed(4)}`;
}

function percent(value) {
  if (value === null || value === undefined) return el("span", { class: "subtle" }, "—");
  const bar = el("span", { class: "meter" }, el("span"));
  bar.firstChild.style.width = `${Math.min(100, Math.max(0, value))}%`;
  return el("span", {}, bar, `${value.toFixed(0)}%`);
}

// --- the stream ---------------------------------------------------------------------

function connect() {
  if (stream) stream.close();
  const query = new URLSearchParams();
  if (selected) query.set("pool", selected);
  query.set("node", String(followed));
  lastLogSeq = 0;
  $("log-lines").textContent = "";
  stream = new EventSource(`api/stream?${query}`);
  stream.onopen = () => setConnection("live", "live");
  stream.onerror = () => setConnection("lost", "reconnecting…");
  stream.addEventListener("state", (message) => {
    pools = JSON.parse(message.data).pools;
    render();
  });
  stream.addEventListener("events", (message) => takeEvents(JSON.parse(message.data)));
  stream.addEventListener("log", (message) => takeLog(JSON.parse(message.data)));
}

function setConnection(state, text) {
  const badge = $("connection");
  badge.dataset.state = state;
  badge.textContent = text;
}

function takeEvents(data) {
  const kept = eventsByPool.get(data.pool) || [];
  const last = lastEventSeq.get(data.pool) || 0;
  const fresh = data.events.filter((line) => line.seq > last);
  if (!fresh.length) return;
  kept.push(...fresh);
  kept.splice(0, Math.max(0, kept.length - KEPT_EVENTS));
  eventsByPool.set(data.pool, kept);
  lastEventSeq.set(data.pool, fresh[fresh.length - 1].seq);
  if (data.pool === selected) appendLines($("event-lines"), fresh, true);
}

function takeLog(data) {
  if (data.pool !== selected || data.node !== followed) return;
  const fresh = data.lines.filter((line) => line.seq > lastLogSeq);
  if (!fresh.length) return;
  lastLogSeq = fresh[fresh.length - 1].seq;
  appendLines($("log-lines"), fresh, false);
}

function appendLines(box, lines, asItems) {
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  for (const line of lines) {
    const row = el(asItems ? "li" : "div", { class: line.level }, el("span", { class: "time" }, clock(line.time)), line.text);
    box.append(row);
  }
  const limit = asItems ? KEPT_EVENTS : KEPT_LINES;
  while (box.childElementCount > limit) box.firstElementChild.remove();
  if (atBottom) box.scrollTop = box.scrollHeight;
}

// --- drawing ------------------------------------------------------------------------

function render() {
  const names = pools.map((pool) => pool.name);
  if (!names.includes(selected)) {
    const previous = selected;
    selected = names[0] || "";
    if (selected !== previous) {
      followed = 0;
      showEvents();
      if (selected) connect();
    }
  }
  renderTabs();
  const pool = pools.find((candidate) => candidate.name === selected);
  $("empty").hidden = Boolean(pool);
  $("pool").hidden = !pool;
  if (!pool) return;
  renderSummary(pool);
  renderTasks(pool);
  renderMaps(pool);
  renderNodes(pool);
}

function renderTabs() {
  const nav = $("pools");
  nav.replaceChildren(...pools.map((pool) => {
    const tab = el("button", {
      class: "pool-tab", type: "button", "data-pool": pool.name, "aria-selected": String(pool.name === selected),
    }, pool.name, el("span", { class: "subtle" }, `${pool.node_count} nodes · ${pool.status}`));
    tab.addEventListener("click", () => select(pool.name));
    return tab;
  }));
}

function select(name) {
  if (name === selected) return;
  selected = name;
  followed = 0;
  history.replaceState(null, "", `?pool=${encodeURIComponent(name)}`);
  showEvents();
  connect();
  render();
}

function showEvents() {
  const box = $("event-lines");
  box.textContent = "";
  appendLines(box, eventsByPool.get(selected) || [], true);
}

function renderSummary(pool) {
  $("pool-name").textContent = pool.name;
  $("pool-status").textContent = pool.status;
  $("pool-provider").textContent = pool.provider || "—";
  const wanted = pool.wanted && pool.wanted !== pool.node_count ? ` (${pool.wanted} wanted)` : "";
  $("pool-nodes").textContent = `${pool.node_count}${wanted}`;
  $("pool-elapsed").textContent = duration(pool.elapsed);
  $("pool-cost").textContent = pool.cost
    ? `${money(pool.cost.so_far)}${pool.cost.hourly ? ` at ${money(pool.cost.hourly)}/h` : ""}`
    : "—";
  const kept = pool.kept === true;
  $("pool-held-figure").hidden = !kept;
  if (kept) {
    $("pool-held").textContent = pool.holder
      ? `in use by pid ${pool.holder}`
      : `idle ${duration(pool.idle)} of ${duration(pool.keep_alive)}`;
  }
}

function renderTasks(pool) {
  const tasks = pool.tasks;
  $("tasks-running").textContent = tasks.running;
  $("tasks-queued").textContent = tasks.queued;
  $("tasks-done").textContent = tasks.done;
  $("tasks-failed").textContent = tasks.failed;
  $("tasks-failed").toggleAttribute("data-zero", tasks.failed === 0);
  $("tasks-rate").textContent = tasks.per_second.toFixed(tasks.per_second >= 100 ? 0 : 1);
}

function renderMaps(pool) {
  const list = $("map-list");
  if (!pool.maps.length) {
    list.replaceChildren(el("p", { class: "subtle" }, "None yet."));
    return;
  }
  list.replaceChildren(...pool.maps.slice().reverse().map((batch) => {
    const share = batch.total ? (100 * batch.done) / batch.total : 100;
    const failedShare = batch.total ? (100 * batch.failed) / batch.total : 0;
    let state = "";
    if (batch.finished) state = batch.cancelled ? "interrupted" : batch.failed ? "failed" : "done";
    else if (batch.eta !== null) state = `ETA ${duration(batch.eta)}`;
    const rate = batch.per_second ? ` · ${batch.per_second.toFixed(1)}/s` : "";
    const failed = batch.failed ? ` · ${batch.failed} failed` : "";
    const done = el("span", { class: "done" });
    done.style.width = `${share}%`;
    const bad = el("span", { class: "failed" });
    bad.style.width = `${failedShare}%`;
    return el("div", { class: "map", "data-batch": batch.id, "data-finished": String(batch.finished) },
      el("div", { class: "title" },
        el("span", {}, `${batch.kind} `, el("strong", {}, batch.name)),
        el("span", { class: "figures" }, `${batch.done}/${batch.total} (${share.toFixed(0)}%)${rate}${failed}`,
          state ? el("span", { class: "subtle" }, ` · ${state}`) : null)),
      el("div", { class: "bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": String(batch.total),
                  "aria-valuenow": String(batch.done) }, done, bad));
  }));
}

function renderNodes(pool) {
  const states = $("node-states");
  states.replaceChildren(...Object.entries(pool.states).map(([state, count]) =>
    el("span", { class: "state" }, el("span", { class: "status", "data-status": state }, state), ` ${count}`)));
  const means = pool.means || {};
  if (means.cpu !== undefined) states.append(el("span", { class: "state subtle" }, `mean CPU ${means.cpu.toFixed(0)}%`));
  $("node-rows").replaceChildren(...pool.nodes.map((node) => {
    const row = el("tr", { "data-node": String(node.node), "aria-selected": String(node.node === followed) },
      el("td", {}, String(node.node)),
      el("td", {}, el("span", { class: "status", "data-status": node.status }, node.status)),
      el("td", {}, percent(node.cpu)),
      el("td", {}, percent(node.memory)),
      el("td", {}, percent(node.gpu)),
      el("td", {}, percent(node.gpu_memory)),
      el("td", { class: "running", title: node.running.join(", ") }, node.running.join(", ") || "—"),
      el("td", { class: "num" }, String(node.done)),
      el("td", { class: "num" }, String(node.failed)));
    row.addEventListener("click", () => follow(node.node));
    return row;
  }));
  const hidden = $("nodes-hidden");
  hidden.hidden = !pool.nodes_hidden;
  hidden.textContent = pool.nodes_hidden
    ? `${pool.nodes_hidden} more nodes not drawn: the table shows those in trouble and the busiest (the counts above are of all ${pool.node_count}).`
    : "";
}

function follow(node) {
  if (node === followed) return;
  followed = node;
  $("log-node").textContent = String(node);
  connect();
  render();
}

connect();
