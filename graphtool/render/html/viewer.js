// graphtool report viewer: pictures per fold level, pan and zoom, search, node details, findings
// linked to their nodes. Inlined into every report; fetches nothing.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("graphtool-data").textContent);
  const $ = (id) => document.getElementById(id);
  const canvas = $("canvas");
  if (!canvas) return;
  const cache = new Map();  // svg index -> text
  const state = { pic: -1, level: -1, view: null, full: null, selected: null };

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }

  async function unpack(index) {
    const bytes = Uint8Array.from(atob(data.svgs[index]), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }
  async function svgText(index) {
    if (!cache.has(index)) cache.set(index, await unpack(index));
    return cache.get(index);
  }
  // each picture's node facts and, per level, which box holds each folded node
  async function unpackFacts() {
    await Promise.all(data.pictures.map(async (p) => {
      const packed = JSON.parse(await unpack(p.packed));
      p.facts = packed.facts;
      p.levels.forEach((l, i) => { l.members = packed.members[i]; });
    }));
  }

  function picture() { return data.pictures[state.pic]; }
  function level() { return picture().levels[state.level]; }

  // -- showing a picture at a fold level --------------------------------------------------------
  async function show(pic, lvl) {
    const p = data.pictures[pic];
    lvl = Math.max(0, Math.min(p.levels.length - 1, lvl));
    if (pic === state.pic && lvl === state.level && canvas.querySelector("svg")) return;
    const switched = pic !== state.pic;
    state.pic = pic; state.level = lvl;
    document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", Number(t.dataset.picture) === pic));
    const sel = $("level");
    sel.innerHTML = p.levels.map((l, i) => `<option value="${i}">${esc(l.name)} (${l.boxes})</option>`).join("");
    sel.value = String(lvl);
    $("fold").disabled = lvl === 0;
    $("unfold").disabled = lvl === p.levels.length - 1;
    canvas.innerHTML = await svgText(p.levels[lvl].svg);
    const svg = canvas.querySelector("svg");
    svg.removeAttribute("width"); svg.removeAttribute("height");
    const vb = svg.viewBox.baseVal;
    state.full = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
    openView();
    canvas.dataset.picture = p.id; canvas.dataset.level = String(lvl);
    if (switched) { $("search-results").innerHTML = ""; $("search-status").textContent = ""; }
    if (state.selected && !switched) mark(state.selected, "selected");
  }

  function nodeGroups() { return canvas.querySelectorAll("g.node"); }
  function titleOf(g) { const t = g.querySelector("title"); return t ? t.textContent : ""; }
  function groupFor(id) {
    for (const g of nodeGroups()) if (titleOf(g) === id) return g;
    return null;
  }

  // -- pan and zoom, through the SVG's viewBox -------------------------------------------------
  function setView(v) {
    state.view = v;
    canvas.querySelector("svg").setAttribute("viewBox", `${v.x} ${v.y} ${v.w} ${v.h}`);
  }
  // the whole picture in the window, centred (the "fit" button)
  function fit() {
    const f = state.full, r = canvas.getBoundingClientRect();
    const pw = r.width || 800, ph = r.height || 600;
    const s = Math.min(pw / f.w, ph / f.h, 1.2);
    const w = pw / s, h = ph / s;
    setView({ x: f.x - (w - f.w) / 2, y: f.y - (h - f.h) / 2, w: w, h: h });
  }
  // how a picture opens: fitted, unless fitting would shrink it past reading; then at a readable
  // size on its first node (the graph's top), not on the empty middle of a wide picture
  function openView() {
    const f = state.full, r = canvas.getBoundingClientRect();
    const pw = r.width || 800, ph = r.height || 600;
    if (Math.min(pw / f.w, ph / f.h) >= 0.3) return fit();
    const s = 0.8, w = pw / s, h = ph / s;
    let cx = f.x + f.w / 2, top = null;
    for (const g of nodeGroups()) {
      const b = g.getBBox();
      if (top === null || b.y < top.y) top = b;
    }
    const svg = canvas.querySelector("svg"), graph = svg.querySelector("g.graph");
    if (top && graph) {  // getBBox is in the node's own coordinates: map through the graph's transform
      const m = graph.getCTM(), root = svg.getCTM();
      const p = svg.createSVGPoint(); p.x = top.x + top.width / 2; p.y = top.y;
      const q = p.matrixTransform(root.inverse().multiply(m));
      cx = Math.max(f.x + w / 2, Math.min(q.x, f.x + f.w - w / 2));
    }
    setView({ x: cx - w / 2, y: f.y, w: w, h: h });
  }
  function zoom(factor, cx, cy) {
    const v = state.view;
    if (cx === undefined) { cx = v.x + v.w / 2; cy = v.y + v.h / 2; }
    const w = Math.max(20, Math.min(v.w * factor, state.full.w * 20));
    const h = w * v.h / v.w;
    setView({ x: cx - (cx - v.x) * w / v.w, y: cy - (cy - v.y) * h / v.h, w: w, h: h });
  }
  function toSvg(clientX, clientY) {
    const r = canvas.getBoundingClientRect(), v = state.view;
    return [v.x + (clientX - r.left) / r.width * v.w, v.y + (clientY - r.top) / r.height * v.h];
  }
  function centerOn(g) {
    // the node's box on screen, mapped back into the viewBox's coordinates
    const r = g.getBoundingClientRect();
    const [x0, y0] = toSvg(r.left, r.top), [x1, y1] = toSvg(r.right, r.bottom);
    const v = state.view;
    const w = Math.min(Math.max(v.w, state.full.w / 4), Math.max((x1 - x0) * 8, 500));
    const h = w * v.h / v.w;
    setView({ x: (x0 + x1) / 2 - w / 2, y: (y0 + y1) / 2 - h / 2, w: w, h: h });
  }

  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const [cx, cy] = toSvg(e.clientX, e.clientY);
    zoom(e.deltaY > 0 ? 1.15 : 1 / 1.15, cx, cy);
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, v: state.view, moved: false }; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; canvas.classList.add("dragging"); }
    if (!drag.moved) return;
    const r = canvas.getBoundingClientRect();
    setView({ x: drag.v.x - dx / r.width * drag.v.w, y: drag.v.y - dy / r.height * drag.v.h, w: drag.v.w, h: drag.v.h });
  });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); canvas.classList.remove("dragging"); });

  // -- selecting nodes and showing their facts -------------------------------------------------
  function mark(id, cls) {
    nodeGroups().forEach((g) => g.classList.remove(cls));
    const g = groupFor(id);
    if (g) g.classList.add(cls);
    return g;
  }
  function boxMembers(boxId) {
    const m = level().members;
    return Object.keys(m).filter((k) => m[k] === boxId);
  }
  function details(id) {
    const p = picture(), f = p.facts[id], d = $("details");
    if (f) {
      const rows = [["op", f.op], ["kind", f.kind], ["graph name", f.graph_name],
        ["shape", f.shape ? "(" + f.shape.join(", ") + ")" : ""], ["dtype", f.dtype], ["device", f.device],
        ["module", f.module], ["source", f.source], ["saved", f.saved], ["target", f.target]];
      const links = (ids) => ids.map((n) => `<a data-goto="${esc(n)}">${esc((p.facts[n] || {}).name || n)}</a>`).join(", ");
      d.innerHTML = `<h3>${esc(f.name)}</h3><dl>` +
        rows.filter((r) => r[1]).map((r) => `<dt>${r[0]}</dt><dd>${esc(r[1])}</dd>`).join("") +
        (f.inputs.length ? `<dt>inputs</dt><dd>${links(f.inputs)}</dd>` : "") +
        (f.users.length ? `<dt>used by</dt><dd>${links(f.users)}</dd>` : "") + "</dl>" + across(p, id, f);
    } else {
      const members = boxMembers(id);
      const g = groupFor(id);
      const label = g ? Array.from(g.querySelectorAll("text")).map((t) => t.textContent).join(" ") : id;
      const names = members.slice(0, 40).map((n) => `<a data-goto="${esc(n)}">${esc((p.facts[n] || {}).name || n)}</a>`).join(", ");
      d.innerHTML = `<h3>${esc(label)}</h3>` + (members.length
        ? `<p>${members.length} nodes folded here.</p><p><button type="button" id="unfold-box">unfold this module</button></p><p>${names}${members.length > 40 ? ", ..." : ""}</p>`
        : `<p class="hint">no facts for this element</p>`);
      const b = $("unfold-box");
      if (b) b.addEventListener("click", () => unfoldBox(id));
    }
    d.dataset.node = id;
  }
  // a saved tensor is one value in two pictures: the forward node that makes it, the backward input that reads it
  function across(p, id, f) {
    if (!f.saved) return "";
    const other = p.graph === "forward" ? "backward" : "forward";
    const pi = data.pictures.findIndex((q) => q.region === p.region && q.graph === other && q.facts && q.facts[id]);
    if (pi < 0) return "";
    return `<p><a data-picture="${pi}" data-goto="${esc(id)}">show ${esc(id)} in the ${other} graph</a></p>`;
  }
  async function select(id, center) {
    state.selected = id;
    const g = mark(id, "selected");
    details(id);
    if (g && center) centerOn(g);
  }
  // the level at which a node is drawn itself, else the box that holds it at the current level
  async function reveal(id) {
    const p = picture();
    if (!groupFor(id)) {
      const lvl = p.levels.findIndex((l) => !(id in l.members));
      if (lvl >= 0 && lvl !== state.level) await show(state.pic, lvl);
    }
    if (groupFor(id)) return select(id, true);
    const box = level().members[id];
    if (box) { await select(box, true); details(id); }
  }
  async function unfoldBox(boxId) {
    const members = boxMembers(boxId);
    const p = picture();
    for (let i = state.level + 1; i < p.levels.length; i++) {
      const lv = p.levels[i];
      if (members.some((n) => lv.members[n] !== boxId)) {
        await show(state.pic, i);
        const first = members.find((n) => groupFor(n)) || lv.members[members[0]];
        if (first) { state.selected = null; const g = mark(first, "selected"); if (g) centerOn(g); }
        $("details").dataset.node = boxId;
        return;
      }
    }
  }

  canvas.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const g = e.target.closest("g.node");
    if (!g) return;
    const id = titleOf(g);
    if (picture().facts[id]) select(id, false);
    else { select(id, false); }
  });
  canvas.addEventListener("dblclick", (e) => {
    const g = e.target.closest("g.node");
    if (g && !picture().facts[titleOf(g)]) unfoldBox(titleOf(g));
  });
  $("details").addEventListener("click", (e) => {
    const a = e.target.closest("a[data-goto]");
    if (!a) return;
    if (a.dataset.picture !== undefined && Number(a.dataset.picture) !== state.pic) {
      const pi = Number(a.dataset.picture);
      show(pi, data.pictures[pi].default).then(() => reveal(a.dataset.goto));
    } else reveal(a.dataset.goto);
  });

  // -- toolbar ---------------------------------------------------------------------------------
  $("level").addEventListener("change", (e) => show(state.pic, Number(e.target.value)));
  $("fold").addEventListener("click", () => show(state.pic, state.level - 1));
  $("unfold").addEventListener("click", () => show(state.pic, state.level + 1));
  $("fit").addEventListener("click", () => { if (state.full) fit(); });
  $("zoom-in").addEventListener("click", () => zoom(1 / 1.3));
  $("zoom-out").addEventListener("click", () => zoom(1.3));
  document.querySelectorAll(".tab").forEach((t) => t.addEventListener("click", () => {
    const i = Number(t.dataset.picture);
    show(i, data.pictures[i].default);
  }));

  // -- search every picture's nodes by name, op, module or graph name ---------------------------
  function search(q) {
    q = q.trim().toLowerCase();
    const out = [];
    if (!q) return out;
    data.pictures.forEach((p, pi) => {
      for (const [id, f] of Object.entries(p.facts)) {
        const hay = [f.name, f.graph_name, f.op, f.module || ""].join(" ").toLowerCase();
        if (hay.includes(q)) out.push({ pi, id, f, exact: f.name.toLowerCase() === q });
      }
    });
    out.sort((a, b) => (b.exact - a.exact) || (a.pi - b.pi));
    return out;
  }
  let timer = null;
  $("search").addEventListener("input", (e) => {
    clearTimeout(timer);
    timer = setTimeout(() => runSearch(e.target.value, false), 150);
  });
  $("search").addEventListener("keydown", (e) => {
    if (e.key === "Enter") { clearTimeout(timer); runSearch(e.target.value, true); }
  });
  async function runSearch(q, jump) {
    const hits = search(q);
    const list = $("search-results");
    $("search-status").textContent = q.trim() ? `${hits.length} match${hits.length === 1 ? "" : "es"}` : "";
    list.innerHTML = hits.slice(0, 200).map((h, i) => {
      const p = data.pictures[h.pi];
      return `<li data-i="${i}">${esc(h.f.name)} <span class="note">${esc(h.f.op)} &middot; region ${p.region} ${p.graph}</span></li>`;
    }).join("");
    list.querySelectorAll("li").forEach((li) => li.addEventListener("click", () => goto(hits[Number(li.dataset.i)])));
    if (hits.length && (jump || hits[0].exact)) await goto(hits[0]);
  }
  async function goto(hit) {
    if (hit.pi !== state.pic) await show(hit.pi, data.pictures[hit.pi].default);
    await reveal(hit.id);
    const g = groupFor(hit.id) || groupFor(level().members[hit.id]);
    if (g) { nodeGroups().forEach((x) => x.classList.remove("match")); g.classList.add("match"); }
    details(hit.id);
  }

  // -- findings link to their node -------------------------------------------------------------
  async function showFinding(li) {
    document.querySelectorAll(".finding").forEach((x) => x.classList.toggle("active", x === li));
    const pi = data.pictures.findIndex((p) => String(p.region) === li.dataset.region && p.graph === li.dataset.graph);
    if (pi < 0) return;
    if (pi !== state.pic) await show(pi, data.pictures[pi].default);
    await reveal(li.dataset.node);
    $("graphs").scrollIntoView({ behavior: "instant", block: "start" });
  }
  document.querySelectorAll(".finding[data-node]").forEach((li) => li.addEventListener("click", () => showFinding(li)));

  // every asynchronous step is counted, so a test (or a user script) can wait until the page is idle
  let inflight = 0;
  const tracked = (fn) => async (...args) => { inflight++; try { return await fn(...args); } finally { inflight--; } };
  show = tracked(show); reveal = tracked(reveal); unfoldBox = tracked(unfoldBox);
  runSearch = tracked(runSearch); goto = tracked(goto); showFinding = tracked(showFinding);
  window.graphtoolViewer = { show, reveal, search: runSearch, state, data, idle: () => inflight === 0 };
  tracked(async () => {
    await unpackFacts();
    if (data.pictures.length) await show(0, data.pictures[0].default);
  })();
})();
