// preemptd report: draws the timeline of a log from the JSON in #report-data, with uPlot.
// The first screen tells what happened: a strip of the preemptions over time, each labelled
// preemptor -> victims with its reason, and the table of those decisions with each victim's why.
// Below: the summary, the queues' charts in their model's terms (drawn when a queue is opened:
// a log may hold a thousand queues), the shares, and every decision, a few hundred rows at a time.
"use strict";
window.addEventListener("error", (e) => { document.body.dataset.error = String(e.message); });

let DATA;  // the page's data: gzipped JSON in base64, unpacked by the browser's own gzip

async function unpack(text) {
  const bytes = Uint8Array.from(atob(text.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
const COLORS = {
  "decision.allocated": "#2f855a", "decision.preempted": "#c53030", "decision.blocked": "#718096",
  "decision.admitted": "#2b6cb0", "decision.evicted": "#b7791f", "decision.unreserved": "#805ad5", "decision.quota_enforced": "#9c4221",
  config: "#319795", dead_letter: "#d53f8c",
};
// How each curve is drawn: held amounts as areas, asked amounts as a band stacked on what they
// wait beside, bounds as lines (the max always dotted red).
const HELD = { allocated: ["#2b6cb0", "rgba(43,108,176,0.22)"], admitted: ["#6b46c1", "rgba(107,70,193,0.14)"] };
const BOUNDS = [["#2f855a", [6, 4]], ["#319795", [8, 3, 2, 3]], ["#718096", [1, 3]]];
const ROWS = 300;
const LANES = 3;  // rows of labels in the strip; more preemptions at once show as ticks with a tooltip

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") node.addEventListener("click", value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

function when(t) {
  if (!DATA.absolute_time) return `${+t.toFixed(3)} s`;
  const moment = new Date(t * 1000).toISOString().replace("T", " ").replace("Z", "");
  return oneDay() ? moment.slice(11) : moment;  // the period line says which day
}

// The time axis' labels in the page's one clock: UTC, 24-hour (uPlot's own are local and 12-hour),
// seconds from the start for a simulated log.
function timeTicks(u, splits) {
  if (!DATA.absolute_time) return splits.map((t) => `${+t.toFixed(3)} s`);
  return splits.map((t) => {
    const moment = new Date(t * 1000).toISOString();
    return oneDay() ? moment.slice(11, t % 60 ? 19 : 16) : moment.slice(5, 16).replace("T", " ");
  });
}

// Whether the window lies within one day (UTC): then times show as the time of day.
function oneDay() {
  const { from, to } = DATA.period;
  return from && to && new Date(from.t * 1000).toISOString().slice(0, 10) === new Date(to.t * 1000).toISOString().slice(0, 10);
}

// A duration as people say it: 350 ms, 8.8 s, 3 min 20 s, 2 h 5 min.
function duration(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${+seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min`;
}

function words(partition, name) { return (partition.curves.find((c) => c.name === name) || { words: name }).words; }
function firstBound(partition) { return partition.curves.find((c) => c.kind === "bound") || { words: "guarantee" }; }

function kind(type) { return type.replace("decision.", ""); }

// The resource a chart's key is in ("cpu in spot" is cpu), and how its amounts read.
function unitOf(resource) { return resource.split(" in ")[0]; }
function binary(resource) { return /memory|storage|bytes/.test(unitOf(resource)); }
function unitWord(resource) {
  const unit = unitOf(resource);
  if (binary(resource)) return "bytes";
  if (unit === "cpu" || unit === "vcore") return "cores";
  if (/gpu/.test(unit)) return "GPUs";
  return unit === "pods" ? "pods" : "";
}

// An amount as people read it: memory in binary units (16 GiB), cores and counts as numbers.
function short(value, resource) {
  if (value == null) return "";
  if (binary(resource)) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (Math.abs(value) >= 1024 && i < units.length - 1) { value /= 1024; i++; }
    return `${+value.toFixed(2)} ${units[i]}`;
  }
  const units = ["", "k", "M", "G"];
  let i = 0;
  while (Math.abs(value) >= 10000 && i < units.length - 1) { value /= 1000; i++; }
  return `${+value.toFixed(2)}${units[i]}`;
}

// Round steps for an axis: powers of two of a binary unit for memory (1, 2, 4 ... GiB), 1-2-5 otherwise.
function increments(resource) {
  const out = [];
  if (binary(resource)) {
    for (let power = 0; power < 60; power++) out.push(2 ** power);
  } else {
    for (let exp = -3; exp < 16; exp++) for (const m of [1, 2, 5]) out.push(+(m * 10 ** exp).toPrecision(1));
  }
  return out;
}

// What a decision is about: the task placed or preempted for, or the application admitted or evicted.
function subject(d) {
  return d.type === "decision.evicted" ? d.app : d.preemptor || d.task || d.app || "";
}

// Which queues a decision is about: its own, and its victims'.
function queuesOf(d) {
  return [d.queue, ...(d.victims || []).map((v) => v.queue)].filter(Boolean);
}

// Why, in one line: the model's reason, its message, or the first reason it waits.
function reasonOf(d) {
  return d.message || d.reason || (d.reasons || [])[0] || "";
}

// Amounts as JSON gives them ({"vcore": 4, "memory": 4294967296}), in a line.
function amounts(values) { return Object.entries(values || {}).map(([r, v]) => `${r} ${short(v, r)}`).join(", "); }

function clip(text, chars) { return text.length <= chars ? text : text.slice(0, chars - 1) + "…"; }

// The preemptions of a partition, as its strip shows them: one per preemptor and cycle
// (Kueue evicts a preemptor's victims as several decisions; a Volcano job reclaims for its
// gang's tasks in one cycle, a decision each), each with its victims and reason.
function preemptions(partition) {
  const out = [], byPreemptor = new Map(), gangs = partition.model === "volcano";
  for (const d of partition.decisions) {
    if (d.type === "decision.preempted") {
      const key = gangs ? `${d.cycle} job ${d.app}` : null;
      const known = key && byPreemptor.get(key);
      if (known) { known.victims.push(...d.victims.map((v) => v.task)); known.decisions.push(d); known.tasks++; continue; }
      const item = { t: d.t, preemptor: d.preemptor, job: d.app, tasks: 1, queue: d.queue, victims: d.victims.map((v) => v.task), why: d.reason || "", decisions: [d] };
      if (key) byPreemptor.set(key, item);
      out.push(item);
    } else if (d.type === "decision.quota_enforced") {
      out.push({ t: d.t, preemptor: "", quota: d.queue, queue: d.queue, victims: d.victims.map((v) => v.task), why: `quota: ${LIMIT[partition.model] || "max"} ${amounts(d.max)}${d.short ? ", short of it" : ""}`, decisions: [d] });
    } else if (d.type === "decision.evicted") {
      const key = d.preemptor ? `${d.cycle} ${d.preemptor}` : null;
      const known = key && byPreemptor.get(key);
      if (known) { known.victims.push(d.app); known.decisions.push(d); continue; }
      const item = { t: d.t, preemptor: d.preemptor || "", queue: d.queue, victims: [d.app], why: d.reason || reasonOf(d), decisions: [d] };
      if (key) byPreemptor.set(key, item);
      out.push(item);
    }
  }
  return out;
}

// What quota enforcement holds a queue to, in each model's words.
const LIMIT = { kueue: "nominal quota", volcano: "capability" };

// Many preemptions (a day's log may hold tens of thousands) share a tick per few pixels.
const CROWD = 300;
function crowded(items, x) {
  const columns = new Map();
  for (const item of items) {
    const column = Math.round(x(item.t) / 3);
    const known = columns.get(column);
    if (!known) columns.set(column, { ...item, victims: [...item.victims], decisions: [...item.decisions], count: 1 });
    else { known.count++; known.decisions.push(...item.decisions); }
  }
  return [...columns.values()];
}

function label(item) {
  if (item.count > 1) return `${item.count} preemptions, the first ${item.preemptor} → ${item.victims[0]}`;
  const victims = item.victims.length > 2 ? `${item.victims.slice(0, 2).join(", ")} +${item.victims.length - 2}` : item.victims.join(", ");
  if (item.quota) return `${item.quota} over its quota → ${victims || "nothing"}`;
  if (item.tasks > 1) return `job ${item.job} (${item.tasks} tasks) → ${victims}`;
  return item.preemptor ? `${item.preemptor} → ${victims}` : `evicted ${victims}`;
}

// The strip: time across the page, a tick per preemption, labels in lanes where they fit.
function strip(partition, table) {
  const items = preemptions(partition);
  const section = el("section", { class: "strip" }, el("h3", {}, `What happened: ${items.length ? `${items.length} preemption${items.length === 1 ? "" : "s"}` : "no preemptions"}`));
  if (!items.length) return section;
  const width = Math.min(1300, document.body.clientWidth - 40), pad = 12, laneHeight = 36;
  const height = 24 + LANES * laneHeight + 18;
  const t0 = partition.times[0] ?? items[0].t, t1 = Math.max(partition.times[partition.times.length - 1] ?? t0, items[items.length - 1].t, t0 + 1e-9);
  const x = (t) => pad + ((t - t0) / (t1 - t0)) * (width - 2 * pad);
  const picture = svg("svg", { width, height, class: "strip-svg", role: "img", "aria-label": "preemptions over time" });
  picture.append(svg("line", { x1: pad, x2: width - pad, y1: height - 16, y2: height - 16, stroke: "#a0aec0" }));
  for (const t of [t0, (t0 + t1) / 2, t1]) picture.append(svg("text", { x: x(t), y: height - 2, "text-anchor": t === t0 ? "start" : t === t1 ? "end" : "middle", class: "tick" }, when(t)));
  const free = new Array(LANES).fill(-Infinity);  // where each lane's last label ends
  for (const item of items.length > CROWD ? crowded(items, x) : items) {
    const at = x(item.t), text = label(item), why = clip(item.why, 48);
    const size = Math.max(text.length, why.length) * 6.4 + 8;
    const anchor = at + size > width ? "end" : "start", left = anchor === "end" ? at - size : at;
    const lane = free.findIndex((end) => end < left);
    const shown = lane >= 0;
    const top = shown ? 4 + lane * laneHeight : height - 30;
    const group = svg("g", { class: "preemption", "data-t": item.t, tabindex: 0 });
    group.append(svg("title", {}, `${when(item.t)} ${text}: ${item.why}`));
    group.append(svg("line", { x1: at, x2: at, y1: shown ? top : height - 26, y2: height - 16, stroke: COLORS[item.decisions[0].type], "stroke-width": 2 }));
    if (shown) {
      const dx = anchor === "end" ? -4 : 4;
      group.append(svg("text", { x: at + dx, y: top + 12, "text-anchor": anchor, class: "who" }, text));
      group.append(svg("text", { x: at + dx, y: top + 26, "text-anchor": anchor, class: "why" }, why));
      free[lane] = left + size;
    }
    group.addEventListener("click", () => table.focus(item.decisions, `${label(item)} at ${when(item.t)}`));
    picture.append(group);
  }
  section.append(picture);
  return section;
}

function summary(partition) {
  const s = partition.summary;
  const counts = Object.entries(s.decisions).map(([type, n]) => el("li", {}, el("span", { class: "dot", style: `background:${COLORS[type]}` }), ` ${kind(type)}: ${n}`));
  const under = s.under_guarantee.map((q) => el("li", {}, `${q.queue}: ${duration(q.seconds)}`));
  const waits = s.longest_waits.map((w) => el("li", {}, `${w.task} (${w.queue}): ${duration(w.seconds)}`, w.id ? el("code", {}, ` ${w.id}`) : " (still pending)"));
  return el("section", { class: "summary" },
    el("div", {}, el("h3", {}, "Decisions"), el("ul", {}, counts.length ? counts : el("li", {}, "none"))),
    el("div", {}, el("h3", {}, `Longest under ${firstBound(partition).words} with asks pending`), el("ul", {}, under.length ? under : el("li", {}, "none"))),
    el("div", {}, el("h3", {}, "Longest waits"), el("ul", {}, waits.length ? waits : el("li", {}, "none"))));
}

// A uPlot plugin: a vertical line per decision or marker, in its type's colour; the one under
// the cursor is named in `said`.
function markerLines(marks, said) {
  return {
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.setLineDash([]);
        ctx.lineWidth = 1.5 * devicePixelRatio;
        for (const m of marks) {
          const x = u.valToPos(m.t, "x", true);
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.strokeStyle = COLORS[m.type || m.kind] || "#000";
          ctx.globalAlpha = m.kind ? 0.5 : 0.8;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
        }
        ctx.restore();
      }],
      setCursor: [(u) => {
        const left = u.cursor.left;
        if (left == null || left < 0) { said.textContent = ""; return; }
        const near = marks.filter((m) => Math.abs(u.valToPos(m.t, "x") - left) <= 4);
        said.textContent = near.length ? `${when(near[0].t)}: ${near.slice(0, 3).map(markText).join("; ")}${near.length > 3 ? `; and ${near.length - 3} more` : ""}` : "";
      }],
    },
  };
}

function markText(m) {
  if (m.kind) return m.text;
  const victims = (m.victims || []).map((v) => v.task);
  if (m.type === "decision.preempted") return `preempted ${victims.join(", ")} for ${m.preemptor} (${m.reason})`;
  if (m.type === "decision.evicted") return `evicted ${m.app}${m.preemptor ? ` for ${m.preemptor}` : ""} (${m.reason})`;
  return `${kind(m.type)} ${subject(m)}${m.node ? ` on ${m.node}` : ""}`;
}

// One chart: a queue's curves for one resource, in its model's words.
function chart(partition, queue, resource, marks, table) {
  const series = queue.series[resource];
  const stepped = uPlot.paths.stepped({ align: 1 });
  const holder = el("div", { class: "chart" });
  const said = el("p", { class: "near" });
  const data = [partition.times], drawn = [{ label: "time", value: (u, v) => (v == null ? "" : when(v)) }], bands = [];
  const index = {};
  let bound = 0;
  for (const curve of partition.curves) {
    const values = series[curve.name];
    if (!values || (curve.kind === "bound" && values.every((v) => v == null))) continue;
    index[curve.name] = data.length;
    // Without the cursor on the chart, the legend says the amount at the end of the window.
    const show = (amount) => (u, v, s, i) => short(i == null ? lastOf(amount) : v, resource);
    if (curve.kind === "asked") {
      const on = series[curve.on] || values.map(() => 0);
      const stacked = values.map((v, i) => (v == null ? null : v + (on[i] || 0)));
      data.push(stacked);
      drawn.push({ label: curve.words, stroke: "#dd6b20", width: 1, paths: stepped, points: { show: false }, value: (u, v, s, i) => short(i == null ? lastOf(values) : values[i], resource) });
      if (index[curve.on]) bands.push({ series: [data.length - 1, index[curve.on]], fill: "rgba(221,107,32,0.22)" });
    } else if (curve.kind === "held") {
      const [stroke, fill] = HELD[curve.name] || ["#4a5568", "rgba(74,85,104,0.12)"];
      data.push(values);
      drawn.push({ label: curve.words, stroke, fill, paths: stepped, points: { show: false }, value: show(values) });
    } else {
      const [stroke, dash] = curve.name === "max" ? ["#c53030", [2, 3]] : BOUNDS[Math.min(bound++, BOUNDS.length - 1)];
      data.push(values);
      drawn.push({ label: curve.words, stroke, dash, width: 1.5, paths: stepped, points: { show: false }, value: show(values) });
    }
  }
  const unit = unitWord(resource);
  const ticks = (u, splits) => splits.map((v) => short(v, resource));
  const opts = {
    title: `${queue.path} · ${resource}${unit && unit !== "bytes" ? ` (${unit})` : ""}`,
    width: Math.min(1100, document.body.clientWidth - 60),
    height: 180,
    scales: { x: { time: DATA.absolute_time }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.08 : 1] } },
    axes: [{ values: timeTicks }, {
      values: ticks,
      incrs: increments(resource),
      // wide enough for the longest tick label: none is clipped
      size: (u, values) => 18 + Math.max(2, ...(values || []).map((v) => String(v).length)) * 7.2,
    }],
    series: drawn,
    bands,
    legend: { live: true },
    plugins: [markerLines(marks, said)],
  };
  const plot = new uPlot(opts, data, holder);
  holder.append(said);
  const mine = new Set(marks);
  plot.over.addEventListener("click", () => {
    const at = plot.posToVal(plot.cursor.left, "x");
    const near = (plot.scales.x.max - plot.scales.x.min) / 100;
    table.show((d) => Math.abs(d.t - at) <= near && mine.has(d), `near ${when(at)} in ${queue.path} and below`);
    table.section.scrollIntoView({ block: "start" });
  });
  return holder;
}

// Per queue, the decisions about it or a queue below it: one pass over the decisions (a day's
// log has hundreds of thousands, and a tree may have a thousand queues).
function decisionsByQueue(partition) {
  const lineage = new Map(partition.queues.map((q) => [q.path, q.lineage]));
  const about = new Map();
  for (const d of partition.decisions) {
    const queues = new Set(queuesOf(d).flatMap((q) => lineage.get(q) || [q]));
    for (const q of queues) {
      if (!about.has(q)) about.set(q, []);
      about.get(q).push(d);
    }
  }
  return about;
}

function queueTree(partition, table) {
  const root = el("div", { class: "queues" });
  const parents = [root];
  const markers = partition.markers;
  const about = decisionsByQueue(partition);
  for (const queue of partition.queues) {
    const marks = (about.get(queue.path) || []).concat(markers);
    const body = el("div", { class: "charts" });
    const open = queue.depth < 2 || partition.queues.length <= 12; // a small tree shows whole
    const node = el("details", { class: "queue", "data-queue": queue.path, ...(open ? { open: "" } : {}) },
      el("summary", {}, el("b", {}, queue.path.split(".").pop()), ` ${queue.path}`, queue.leaf ? "" : " ▸ subtree", el("span", { class: "count" }, ` · ${marks.length - markers.length} decisions`)),
      body);
    const draw = () => {
      if (node.open && !body.childElementCount) for (const resource of Object.keys(queue.series)) body.append(chart(partition, queue, resource, marks, table));
    };
    node.addEventListener("toggle", draw);
    parents.length = queue.depth + 1;
    (parents[queue.depth] || root).append(node);
    parents[queue.depth + 1] = node;
    if (open) requestAnimationFrame(draw);
  }
  return root;
}

const SHARE_LINES = 12;  // the queues with the largest shares get a line each
const PALETTE = ["#2b6cb0", "#c53030", "#2f855a", "#b7791f", "#6b46c1", "#d53f8c", "#319795", "#dd6b20", "#4a5568", "#38a169", "#805ad5", "#e53e3e"];

function share(value) { return value == null ? "" : (+value.toFixed(3)).toString(); }
function lastOf(values) { for (let i = values.length - 1; i >= 0; i--) if (values[i] != null) return values[i]; return null; }

// The shares the model orders queues by, over time: one line per queue or cohort.
function sharesChart(partition) {
  const shares = partition.shares;
  const names = Object.keys(shares.series);
  if (!names.length) return "";
  const peak = (name) => Math.max(0, ...shares.series[name].filter((v) => v != null));
  const shown = names.sort((a, b) => peak(b) - peak(a) || (a < b ? -1 : 1)).slice(0, SHARE_LINES);
  const holder = el("div", { class: "chart shares" });
  const section = el("section", { class: "shares" }, el("h3", {}, `Shares over time: ${shares.words}`),
    names.length > shown.length ? el("p", { class: "legend" }, `The ${shown.length} largest of ${names.length}.`) : "", holder);
  requestAnimationFrame(() => new uPlot({
    width: Math.min(1100, document.body.clientWidth - 60), height: 200,
    scales: { x: { time: DATA.absolute_time } },
    series: [{ label: "time", value: (u, v) => (v == null ? "" : when(v)) },
      ...shown.map((name, i) => ({ label: name, stroke: PALETTE[i % PALETTE.length], width: 1.5, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: (u, v, s, at) => share(at == null ? lastOf(shares.series[name]) : v) }))],
  }, [partition.times, ...shown.map((name) => shares.series[name])], holder));
  return section;
}

function victimsCell(d, table) {
  const victims = d.victims || (d.type === "decision.evicted" ? [{ task: d.app, queue: d.queue, why: d.message || "" }] : []);
  return victims.map((v) => el("div", { class: "victim" },
    el("a", { href: "#", onclick: (e) => { e.preventDefault(); table.show((x) => x.task === v.task || x.app === v.task || x.preemptor === v.task || (x.victims || []).some((w) => w.task === v.task), `about ${v.task}`); } }, v.task),
    ` (${v.queue})`, v.why ? el("div", { class: "why" }, v.why) : ""));
}

function decisionTable(partition) {
  const rows = el("tbody");
  const caption = el("p", { class: "caption" });
  const more = el("button", { type: "button" }, "show more");
  const all = el("button", { type: "button" }, "show all decisions");
  const filter = el("input", { type: "search", placeholder: "filter: a task, queue, node, type or id" });
  let shown = [], count = 0;
  const row = (d) => {
    const why = [...(d.explanation || []), ...(d.reasons || [])].filter(Boolean);
    const preemptor = d.type === "decision.evicted" ? d.preemptor || "" : subject(d);
    return el("tr", { "data-id": d.id, "data-type": d.type },
      el("td", {}, when(d.t)), el("td", {}, el("span", { class: "dot", style: `background:${COLORS[d.type]}` }), ` ${kind(d.type)}`),
      el("td", {}, d.queue || ""), el("td", {}, preemptor), el("td", {}, d.node || ""),
      el("td", { class: "reason" }, d.type === "decision.evicted" ? d.reason : reasonOf(d)),  // an eviction's message is its victim's why
      el("td", {}, victimsCell(d, table)),
      el("td", {}, el("details", {}, el("summary", {}, "explanation"), el("ul", {}, why.map((w) => el("li", {}, w))), el("p", {}, "preemptd explain ", el("code", {}, d.id)))));
  };
  const render = () => {
    for (const d of shown.slice(count, count + ROWS)) rows.append(row(d));
    count = Math.min(shown.length, count + ROWS);
    more.hidden = count >= shown.length;
  };
  const table = {
    show(predicate, what) {
      shown = partition.decisions.filter(predicate);
      count = 0;
      rows.replaceChildren();
      caption.textContent = `${shown.length} of ${partition.decisions.length} decisions${what ? " " + what : ""}`;
      all.hidden = shown.length === partition.decisions.length;
      render();
    },
    // The decisions of one preemption, their explanation open.
    focus(decisions, what) {
      const ids = new Set(decisions.map((d) => d.id));
      table.show((d) => ids.has(d.id), what);
      for (const open of rows.querySelectorAll("details")) open.open = true;
      section.scrollIntoView({ block: "start" });
    },
  };
  more.addEventListener("click", render);
  all.addEventListener("click", () => { filter.value = ""; table.show(() => true, ""); });
  filter.addEventListener("input", () => {
    const text = filter.value.trim().toLowerCase();
    table.show((d) => !text || JSON.stringify(d).toLowerCase().includes(text), text ? `matching “${text}”` : "");
  });
  const section = el("section", { class: "decisions" }, el("h3", {}, "Decisions"), el("div", { class: "tools" }, filter, all), caption,
    el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, ["time", "decision", "queue", "task or preemptor", "node", "why", "victims and why each", "details"].map((h) => el("th", {}, h)))), rows)), more);
  table.section = section;
  const preempting = (d) => d.type === "decision.preempted" || d.type === "decision.evicted" || d.type === "decision.quota_enforced";
  if (partition.decisions.some(preempting)) table.show(preempting, "that preempt or evict");
  else table.show(() => true, "");
  return table;
}

// The model's tables at the end of the window (Kueue's cohorts, Volcano's jobs), as `state` shows them.
function modelTables(partition) {
  return Object.entries(partition.tables || {}).map(([name, t]) => el("details", { class: "model-table", "data-table": name, open: "" },
    el("summary", {}, `${name} at the end of the window${t.rows.length < t.total ? ` (the first ${t.rows.length} of ${t.total})` : ""}`),
    el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, t.columns.map((c) => el("th", {}, c)))), el("tbody", {}, t.rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c)))))))));
}

function markersList(partition) {
  if (!partition.markers.length) return "";
  return el("details", { class: "markers" }, el("summary", {}, `configuration changes and dead letters: ${partition.markers.length}`),
    el("ul", {}, partition.markers.map((m) => el("li", {}, el("span", { class: "dot", style: `background:${COLORS[m.kind]}` }), ` ${when(m.t)} ${m.text}`))));
}

function differences() {
  const diff = DATA.compare;
  if (!diff) return "";
  const item = (d) => el("li", {}, `cycle ${d.cycle} · ${kind(d.type)} ${subject(d)} ${d.node ? "on " + d.node : ""} `, el("code", {}, d.id));
  return el("section", { class: "compare" }, el("h2", {}, `What-if: against ${diff.other}`),
    el("p", {}, `${diff.only_here.length} decisions only in this log, ${diff.only_other.length} only in the other; ${diff.same} the same.`),
    el("div", { class: "columns" },
      el("div", {}, el("h3", {}, "Only in this log"), el("ul", { class: "only-here" }, diff.only_here.map(item))),
      el("div", {}, el("h3", {}, `Only in ${diff.other}`), el("ul", { class: "only-other" }, diff.only_other.map(item)))));
}

function legend(partition) {
  const lines = partition.curves.map((c) => `${c.words} (${c.kind === "held" ? "area" : c.kind === "asked" ? `orange band above ${words(partition, c.on)}` : c.name === "max" ? "dotted red line" : "dashed line"})`);
  return el("p", { class: "legend" }, `Per queue and resource: ${lines.join(", ")}. A vertical line is a decision (coloured by type) or a configuration change or dead letter; hover to name it, click near one to list its decisions.`);
}

function main() {
  const page = document.getElementById("report");
  const day = DATA.absolute_time && oneDay() ? `${new Date(DATA.period.from.t * 1000).toISOString().slice(0, 10)} (UTC), ` : "";
  const period = DATA.period.from ? `${day}${when(DATA.period.from.t)} to ${when(DATA.period.to.t)} (log seq ${DATA.period.from.seq} to ${DATA.period.to.seq})` : "an empty window";
  page.append(el("h1", {}, DATA.title), el("p", { class: "period" }, `Log ${DATA.log_id}: ${period}`), differences());
  for (const partition of DATA.partitions) {
    const table = decisionTable(partition);
    const config = partition.markers.filter((m) => m.kind === "config").pop();
    page.append(el("section", { class: "partition", "data-partition": partition.name },
      el("h2", {}, `Partition ${partition.name} (${partition.model})`),
      config ? el("p", { class: "config" }, config.text.replace(/^configuration applied: /, "What runs: ")) : "",
      strip(partition, table), table.section, summary(partition), markersList(partition), modelTables(partition),
      el("h3", {}, "Queues"), legend(partition), queueTree(partition, table), sharesChart(partition)));
  }
  if (!DATA.partitions.length) page.append(el("p", {}, "Nothing in this window."));
  document.body.dataset.rendered = "ok";
}

unpack(document.getElementById("report-data").textContent).then((data) => { DATA = data; main(); }).catch((e) => { document.body.dataset.error = String(e); throw e; });
