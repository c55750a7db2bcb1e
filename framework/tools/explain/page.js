"use strict";
(function () {
// Everything is looked up under this page's root, so several pages can share one document (Jupyter).
const ROOT = document.currentScript.closest(".gradgen-explain");
const $ = sel => ROOT.querySelector(sel);
const opEl = id => ROOT.querySelector('[data-op="' + id + '"]');
const M = JSON.parse($(".gg-model").textContent);
const COLOURS = {"parameter": "#9ca3af", "feed": "#d1d5db", "optimizer state": "#a78bfa", "activation": "#60a5fa",
                 "gradient": "#f87171", "staged update": "#34d399", "temporary": "#fbbf24"};
const byId = {};
M.blocks.forEach(b => b.ops.forEach(op => { byId[op.id] = {op: op, block: b}; }));
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function fmtBytes(n) {
  if (n === null || n === undefined) return "unknown size";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; let x = n;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return i === 0 ? n + " B" : x.toFixed(1) + " " + u[i];
}
function joined(items, make, sep) {
  const s = el("span");
  items.forEach((x, k) => { if (k) s.appendChild(document.createTextNode(sep)); s.appendChild(make(x)); });
  return s;
}
function setAttrs(node, attrs) {
  Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
  return node;
}
function varChip(name, blockIdx) {
  const s = el("span", "v", name);
  s.dataset.v = name; s.dataset.b = blockIdx;
  s.addEventListener("click", ev => { ev.stopPropagation(); showVar(name, blockIdx); });
  return s;
}
function opCard(op, block) {
  const d = el("div", "op " + op.role);
  d.dataset.op = op.id;
  d.appendChild(el("div", "", op.text.replace(/ {2}<- .*$/, "")));
  if (op.origin_text) d.appendChild(el("div", "origin", "\u2190 " + op.origin_text));
  const io = el("div", "origin");
  io.appendChild(document.createTextNode("reads "));
  io.appendChild(joined(op.ins, n => varChip(n, block.idx), ", "));
  io.appendChild(document.createTextNode(" \u2192 writes "));
  io.appendChild(joined(op.outs, n => varChip(n, block.idx), ", "));
  d.appendChild(io);
  d.addEventListener("click", ev => { ev.stopPropagation(); select(op.id); });
  op.blocks.forEach(sub => {
    const det = el("details");
    det.dataset.block = sub;
    det.appendChild(el("summary", "", "block " + sub + " (" + M.blocks[sub].ops.length + " ops)"));
    det.appendChild(renderBlock(M.blocks[sub]));
    det.addEventListener("toggle", redraw);
    d.appendChild(det);
  });
  return d;
}
function renderBlock(block) {
  const table = el("table", "cols");
  const head = el("tr");
  head.appendChild(el("th", "", "forward (block " + block.idx + ")"));
  head.appendChild(el("th", "", "backward and optimizer"));
  table.appendChild(head);
  const rowOf = {}; const rows = [];
  block.ops.forEach(op => {
    if (op.role !== "forward") return;
    const tr = el("tr"); const left = el("td"); const right = el("td");
    left.appendChild(opCard(op, block)); tr.appendChild(left); tr.appendChild(right);
    rowOf[op.id] = right; rows.push(tr);
  });
  const rest = el("td"); let restUsed = false;
  block.ops.slice().reverse().forEach(op => {
    if (op.role === "forward") return;
    const home = op.row ? rowOf[op.row] : undefined;
    if (home) home.appendChild(opCard(op, block)); else { restUsed = true; rest.prepend(opCard(op, block)); }
  });
  rows.forEach(r => table.appendChild(r));
  if (restUsed) {
    const tr = el("tr");
    tr.appendChild(el("td", "origin", "(no forward op in this block)")); tr.appendChild(rest); table.appendChild(tr);
  }
  return table;
}
let svg;
function shown(e) { return !!e && e.getClientRects().length > 0 && e.getBoundingClientRect().height > 0; }
function related(op) {
  return op.links.concat(op.linked_from, op.row && op.row !== op.id && !op.links.includes(op.row) ? [op.row] : []);
}
let selected = null;
function redraw() {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  if (!selected) return;
  const host = $(".gg-ops").getBoundingClientRect();
  const a = opEl(selected);
  if (!shown(a)) return;
  related(byId[selected].op).forEach(id => {
    const b = opEl(id);
    if (!shown(b)) return;
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    setAttrs(line, {points: route(a.getBoundingClientRect(), b.getBoundingClientRect(), host),
                    fill: "none", stroke: "#d97706", "stroke-width": 2});
    svg.appendChild(line);
  });
}
// A link leaves a card by the side facing the other card; between cards of one column it runs down the gutter to
// their left. The lines lie under the cards (page.css), so they never cross an op's text.
function route(ra, rb, host) {
  const mid = r => (r.top + r.bottom) / 2 - host.top;
  if (ra.right <= rb.left || rb.right <= ra.left) {
    const [l, r] = ra.right <= rb.left ? [ra, rb] : [rb, ra];
    return [l.right - host.left, mid(l), r.left - host.left, mid(r)].join(" ");
  }
  const gutter = Math.min(ra.left, rb.left) - host.left - 5;
  return [ra.left - host.left, mid(ra), gutter, mid(ra), gutter, mid(rb), rb.left - host.left, mid(rb)].join(" ");
}
function select(id) {
  ROOT.querySelectorAll(".op.hl, .op.hl2").forEach(e => e.classList.remove("hl", "hl2"));
  selected = id;
  const info = byId[id].op;
  opEl(id).classList.add("hl");
  related(info).forEach(o => { const e = opEl(o); if (e) e.classList.add("hl2"); });
  showOp(info, byId[id].block);
  redraw();
}
function opLink(id) {
  if (!id) return el("span", "", "-");
  const {op, block} = byId[id];
  const a = el("a", "", "#" + op.index + " " + op.type + (block.idx ? " (block " + block.idx + ")" : ""));
  a.href = "#" + id;
  a.addEventListener("click", ev => { ev.preventDefault(); reveal(id); select(id); });
  return a;
}
function reveal(id) {
  let e = opEl(id);
  while (e && e !== ROOT) { if (e.tagName === "DETAILS") e.open = true; e = e.parentElement; }
  opEl(id).scrollIntoView({block: "center"});
}
function factRow(box, key, value) {
  const p = el("div"); p.appendChild(el("b", "", key + ": "));
  if (value instanceof Node) p.appendChild(value); else p.appendChild(document.createTextNode(value));
  box.appendChild(p);
}
function showOp(op, block) {
  const box = $(".gg-facts"); box.textContent = "";
  box.appendChild(el("h3", "", "op #" + op.index + " " + op.type + " (block " + block.idx + ", " + op.role + ")"));
  if (op.origin_text) factRow(box, "provenance", op.origin_text);
  if (op.callsite) factRow(box, "made at", op.callsite);
  if (op.links.length) factRow(box, "made for / reads from", joined(op.links, opLink, " "));
  if (op.linked_from.length) factRow(box, "linked from", joined(op.linked_from, opLink, " "));
}
function showVar(name, blockIdx) {
  let b = M.blocks[blockIdx];
  while (!b.vars[name] && b.parent >= 0) b = M.blocks[b.parent];
  const v = b.vars[name];
  ROOT.querySelectorAll(".v.sel").forEach(e => e.classList.remove("sel"));
  ROOT.querySelectorAll(".v").forEach(e => { if (e.dataset.v === name) e.classList.add("sel"); });
  const box = $(".gg-facts"); box.textContent = "";
  box.appendChild(el("h3", "", name));
  if (!v) { box.appendChild(el("div", "", "not declared in this block or its parents")); return; }
  factRow(box, "type", v.type); factRow(box, "bytes", fmtBytes(v.bytes));
  factRow(box, "kind", v.kind + (M.kind_meaning[v.kind] ? " (" + M.kind_meaning[v.kind] + ")" : ""));
  const source = v.persistable ? "the scope (persistable)" : "a feed";
  factRow(box, "made by", v.made_by.length ? joined(v.made_by, opLink, " ") : source);
  factRow(box, "read by", v.read_by.length ? joined(v.read_by, opLink, " ") : "nothing");
  factRow(box, "kept alive until", v.last_reader ? opLink(v.last_reader) : "-");
  if (v.grad_of) { const g = el("span"); g.appendChild(varChip(v.grad_of, b.idx)); factRow(box, "gradient of", g); }
}
function renderMemory() {
  const box = $(".gg-memory");
  if (!M.memory) {
    box.appendChild(el("p", "", "No memory timeline: " + (M.memory_error || "nothing to run")));
    return;
  }
  const mem = M.memory; const W = 900, H = 220, P = 40;
  box.appendChild(el("h2", "", "Memory: bytes live after each op, by kind"));
  box.appendChild(el("p", "sentence", mem.sentence));
  const legend = el("div", "legend");
  mem.kinds.forEach(k => {
    const s = el("span"); const i = el("i");
    i.style.background = COLOURS[k]; s.appendChild(i); s.appendChild(document.createTextNode(k)); legend.appendChild(s);
  });
  box.appendChild(legend);
  const n = mem.steps.length; if (!n) return;
  const top = Math.max(1, ...mem.steps.map(s => s.kinds.reduce((a, b) => a + b, 0)));
  const ns = "http://www.w3.org/2000/svg";
  const chart = document.createElementNS(ns, "svg");
  setAttrs(chart, {width: W + 2 * P, height: H + P}).classList.add("gg-timeline");
  const x = i => P + (n === 1 ? W / 2 : i * W / (n - 1)); const y = v => H - v * (H - 10) / top;
  let base = new Array(n).fill(0);
  mem.kinds.forEach((k, ki) => {
    const next = mem.steps.map((s, i) => base[i] + s.kinds[ki]);
    const pts = next.map((v, i) => x(i) + "," + y(v)).concat(base.map((v, i) => x(i) + "," + y(v)).reverse());
    const poly = document.createElementNS(ns, "polygon");
    setAttrs(poly, {points: pts.join(" "), fill: COLOURS[k]});
    const t = document.createElementNS(ns, "title"); t.textContent = k; poly.appendChild(t);
    chart.appendChild(poly); base = next;
  });
  const svgEl = (tag, attrs, text) => {
    const node = setAttrs(document.createElementNS(ns, tag), attrs);
    if (text !== undefined) node.textContent = text;
    return chart.appendChild(node);
  };
  if (mem.peak_step >= 0) {
    const px = x(mem.peak_step);
    svgEl("line", {x1: px, x2: px, y1: 0, y2: H, stroke: "#000", "stroke-dasharray": "4 3"});
    svgEl("text", {x: px + 4, y: 12}, "peak " + fmtBytes(mem.peak_bytes + mem.resting_bytes));
  }
  const axis = svgEl("text", {x: P, y: H + 20}, "step (click to select its op); top " + fmtBytes(top));
  chart.appendChild(axis);
  chart.addEventListener("click", ev => {
    const r = chart.getBoundingClientRect(); const i = Math.round((ev.clientX - r.left - P) * (n - 1) / W);
    const s = mem.steps[Math.max(0, Math.min(n - 1, i))]; reveal(s.op); select(s.op);
  });
  box.appendChild(chart);
  box.appendChild(el("h3", "", "Live at the peak (run-made vars)"));
  const t = el("table", "peak"); const h = el("tr");
  ["var", "kind", "bytes", "kept alive by"].forEach(c => h.appendChild(el("th", "", c))); t.appendChild(h);
  mem.at_peak.forEach(r => {
    const tr = el("tr"); const td = el("td"); td.appendChild(varChip(r.name, 0)); tr.appendChild(td);
    tr.appendChild(el("td", "", r.kind)); tr.appendChild(el("td", "", fmtBytes(r.bytes)));
    const k = el("td"); k.appendChild(r.keeper ? opLink(r.keeper) : document.createTextNode("-")); tr.appendChild(k);
    t.appendChild(tr);
  });
  box.appendChild(t);
}
function start() {
  const ops = $(".gg-ops");
  svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  setAttrs(svg, {width: "100%", height: "100%"}).classList.add("gg-links");
  ops.appendChild(svg);
  M.roots.forEach(r => ops.appendChild(renderBlock(M.blocks[r])));
  renderMemory();
  window.addEventListener("resize", redraw);
  ROOT.dataset.ready = "1";
}
start();
})();
