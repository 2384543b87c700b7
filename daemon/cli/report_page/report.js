// preemptd report: draws the timeline of a log from the JSON in #report-data, with uPlot.
// Charts are drawn when their queue is opened (a log may hold a thousand queues); decisions
// are listed whole, a few hundred rows at a time.
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
  "decision.admitted": "#2b6cb0", "decision.evicted": "#b7791f", "decision.unreserved": "#805ad5",
  config: "#319795", dead_letter: "#d53f8c",
};
const ROWS = 300;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") node.addEventListener("click", value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function when(t) {
  if (!DATA.absolute_time) return `${+t.toFixed(3)} s`;
  return new Date(t * 1000).toISOString().replace("T", " ").replace("Z", "");
}

function words(partition, name) { return (partition.curves.find((c) => c.name === name) || { words: name }).words; }

function kind(type) { return type.replace("decision.", ""); }

// An amount as its axis shows it: bytes in binary units (memory), counts and cores in SI.
function short(value, resource) {
  if (value == null) return "";
  const binary = /memory|storage|bytes/.test(resource);
  const [base, units] = binary ? [1024, ["", "Ki", "Mi", "Gi", "Ti", "Pi"]] : [1000, ["", "k", "M", "G", "T", "P"]];
  let i = 0;
  while (Math.abs(value) >= base && i < units.length - 1) { value /= base; i++; }
  return `${+value.toFixed(2)}${units[i]}`;
}

// What a decision is about: the task placed or preempted for, or the application admitted or evicted.
function subject(d) {
  return d.type === "decision.evicted" ? d.app : d.preemptor || d.task || d.app || "";
}

// Which queues a decision is about: its own, and its victims'.
function queuesOf(d) {
  return [d.queue, ...(d.victims || []).map((v) => v.queue)].filter(Boolean);
}

function summary(partition) {
  const s = partition.summary;
  const counts = Object.entries(s.decisions).map(([type, n]) => el("li", {}, el("span", { class: "dot", style: `background:${COLORS[type]}` }), ` ${kind(type)}: ${n}`));
  const under = s.under_guarantee.map((q) => el("li", {}, `${q.queue}: ${+q.seconds.toFixed(1)} s`));
  const waits = s.longest_waits.map((w) => el("li", {}, `${w.task} (${w.queue}): ${+w.seconds.toFixed(1)} s`, w.id ? el("code", {}, ` ${w.id}`) : " (still pending)"));
  return el("section", { class: "summary" },
    el("div", {}, el("h3", {}, "Decisions"), el("ul", {}, counts.length ? counts : el("li", {}, "none"))),
    el("div", {}, el("h3", {}, `Longest under ${words(partition, "guaranteed")} with asks pending`), el("ul", {}, under.length ? under : el("li", {}, "none"))),
    el("div", {}, el("h3", {}, "Longest waits"), el("ul", {}, waits.length ? waits : el("li", {}, "none"))));
}

// A uPlot plugin: a vertical line per decision or marker, in its type's colour.
function markerLines(marks) {
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
    },
  };
}

function chart(partition, queue, resource, marks, table) {
  const series = queue.series[resource];
  const stepped = uPlot.paths.stepped({ align: 1 });
  const holder = el("div", { class: "chart" });
  const opts = {
    title: `${queue.path} · ${resource}`,
    width: Math.min(1100, document.body.clientWidth - 60),
    height: 170,
    scales: { x: { time: DATA.absolute_time } },
    axes: [{}, { size: 64, values: (u, splits) => splits.map((v) => short(v, resource)) }],
    series: [
      { label: "time", value: (u, v) => (v == null ? "" : when(v)) },
      { label: "allocated", value: (u, v) => short(v, resource), stroke: "#2b6cb0", fill: "rgba(43,108,176,0.18)", paths: stepped, points: { show: false } },
      { label: "pending", value: (u, v) => short(v, resource), stroke: "#dd6b20", fill: "rgba(221,107,32,0.12)", paths: stepped, points: { show: false } },
      { label: words(partition, "guaranteed"), value: (u, v) => short(v, resource), stroke: "#2f855a", dash: [6, 4], paths: stepped, points: { show: false } },
      { label: words(partition, "max"), value: (u, v) => short(v, resource), stroke: "#c53030", dash: [2, 3], paths: stepped, points: { show: false } },
    ],
    plugins: [markerLines(marks)],
  };
  const plot = new uPlot(opts, [partition.times, series.allocated, series.pending, series.guaranteed, series.max], holder);
  const mine = new Set(marks);
  plot.over.addEventListener("click", () => {
    const at = plot.posToVal(plot.cursor.left, "x");
    const near = (plot.scales.x.max - plot.scales.x.min) / 100;
    table.show((d) => Math.abs(d.t - at) <= near && mine.has(d), `near ${when(at)} in ${queue.path} and below`);
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

function decisionTable(partition) {
  const rows = el("tbody");
  const caption = el("p", { class: "caption" });
  const more = el("button", { type: "button" }, "show more");
  const filter = el("input", { type: "search", placeholder: "filter: a task, queue, node, type or id" });
  let shown = [], count = 0;
  const row = (d) => {
    const victims = (d.victims || []).map((v) => el("a", { href: "#", onclick: (e) => { e.preventDefault(); table.show((x) => x.task === v.task || x.preemptor === v.task || (x.victims || []).some((w) => w.task === v.task), `about ${v.task}`); } }, `${v.task} (${v.queue})`));
    const why = [...(d.explanation || []), ...(d.reasons || []), d.message || ""].filter(Boolean);
    return el("tr", { "data-id": d.id, "data-type": d.type },
      el("td", {}, when(d.t)), el("td", {}, el("span", { class: "dot", style: `background:${COLORS[d.type]}` }), ` ${kind(d.type)}`),
      el("td", {}, d.queue || ""), el("td", {}, subject(d)), el("td", {}, d.node || ""),
      el("td", {}, victims.length ? victims.flatMap((v, i) => (i ? [", ", v] : [v])) : ""),
      el("td", {}, el("details", {}, el("summary", {}, el("code", {}, d.id)), el("ul", {}, why.map((w) => el("li", {}, w))), el("p", {}, "preemptd explain ", el("code", {}, d.id)))));
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
      render();
    },
  };
  more.addEventListener("click", render);
  filter.addEventListener("input", () => {
    const words = filter.value.trim().toLowerCase();
    table.show((d) => !words || JSON.stringify(d).toLowerCase().includes(words), words ? `matching “${words}”` : "");
  });
  const section = el("section", { class: "decisions" }, el("h3", {}, "Decisions"), filter, caption,
    el("table", {}, el("thead", {}, el("tr", {}, ["time", "decision", "queue", "task", "node", "victims", "id and why"].map((h) => el("th", {}, h)))), rows), more);
  table.section = section;
  table.show(() => true, "");
  return table;
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

function main() {
  const page = document.getElementById("report");
  const period = DATA.period.from ? `${when(DATA.period.from.t)} to ${when(DATA.period.to.t)} (log seq ${DATA.period.from.seq} to ${DATA.period.to.seq})` : "an empty window";
  page.append(el("h1", {}, DATA.title), el("p", { class: "period" }, `Log ${DATA.log_id}: ${period}`), differences());
  for (const partition of DATA.partitions) {
    const table = decisionTable(partition);
    page.append(el("section", { class: "partition", "data-partition": partition.name },
      el("h2", {}, `Partition ${partition.name} (${partition.model})`), summary(partition), markersList(partition),
      el("h3", {}, "Queues"), el("p", { class: "legend" }, `Usage as a step chart per resource against the ${words(partition, "guaranteed")} (dashed green) and ${words(partition, "max")} (dotted red) lines; pending asks in orange. A vertical line is a decision (coloured by type) or a configuration change or dead letter; click near one to list its decisions below.`),
      queueTree(partition, table), table.section));
  }
  if (!DATA.partitions.length) page.append(el("p", {}, "Nothing in this window."));
  document.body.dataset.rendered = "ok";
}

unpack(document.getElementById("report-data").textContent).then((data) => { DATA = data; main(); }).catch((e) => { document.body.dataset.error = String(e); throw e; });
