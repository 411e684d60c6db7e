/// The status page at `/.httpcachefs/`: one self-contained HTML document (CSS and a small script
/// inline, nothing fetched from elsewhere) that draws `status.json` (a relative URL, so the same
/// page works under a token prefix) and redraws it every 3 seconds without reloading.
///
/// Layout, top to bottom: banners (`#banners`, one `div.banner` each: recent errors; more kinds
/// can be added with `banner()`), summary cards, files grouped by origin (`tr.origin`) and folder
/// (`tr.folder`), directory listings in their own table, fetches in flight, doors, recent errors.
/// Every table sits in a `.scroll` box that scrolls sideways at phone width, the name column
/// staying in view (sticky), rather than hiding columns.
///
/// Coverage bars are drawn to scale: each cached range is a segment whose `left` and `width` are
/// its offset and length as percentages of the file; ranges being fetched now are segments of
/// another colour. Rows carry `data-url`, bars `data-cached-fraction`, so tests (and scripts) can
/// find them in the rendered DOM. A file's name (its full URL on hover) links to `#URL`, which
/// opens its details (all ranges, validators, generation, errors, proxy URL); a page opened at
/// `#URL` opens that row and scrolls it into view. The files table sorts by a click on a header
/// (within each folder).
enum StatusPage {
    static let headers: [(String, String)] = [
        ("Cache-Control", "no-store"),
        // Inline style and script only; the script may fetch from this origin alone.
        ("Content-Security-Policy",
         "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
    ]

    static let html: [UInt8] = Array(text.utf8)

    static let text = #"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>httpcachefs</title>
<style>
:root { --fg:#1d2330; --muted:#667085; --line:#e3e6ec; --bg:#fff; --panel:#f6f7f9; --group:#eef1f6; --cached:#2f7d4f; --fetching:#e69500; --empty:#e8eaee; --err:#b42318; --errbg:#fef3f2; --errline:#fecdca; --target:#fff6d6; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; flex-wrap:wrap; gap:4px 16px; align-items:baseline; padding:10px 16px; border-bottom:1px solid var(--line); }
header h1 { font-size:18px; margin:0; }
header .meta { color:var(--muted); overflow-wrap:anywhere; }
main { padding:8px 16px 24px; max-width:1400px; }
h2 { font-size:15px; margin:18px 0 6px; }
h2 .count { color:var(--muted); font-weight:normal; }
#banners:empty { display:none; }
.banner { border:1px solid var(--errline); background:var(--errbg); color:var(--err); border-radius:6px; padding:8px 12px; margin:4px 0 8px; overflow-wrap:anywhere; }
.banner b { margin-right:6px; }
.banner .detail { color:var(--fg); }
.banner a { color:inherit; margin-left:6px; white-space:nowrap; }
.cards { display:grid; grid-template-columns:repeat(auto-fit, minmax(140px, 1fr)); gap:8px; }
.card { background:var(--panel); border-radius:6px; padding:8px 10px; }
.card .k { color:var(--muted); font-size:12px; }
.card .v { font-size:17px; font-variant-numeric:tabular-nums; white-space:nowrap; }
.usebar { position:relative; height:10px; background:var(--empty); border-radius:3px; margin-top:6px; overflow:hidden; }
.usebar .used { position:absolute; left:0; top:0; bottom:0; background:var(--cached); }
/* Tables never shrink below what their columns need: at phone width their box scrolls sideways. */
.scroll { overflow-x:auto; -webkit-overflow-scrolling:touch; }
table { border-collapse:separate; border-spacing:0; width:100%; font-variant-numeric:tabular-nums; }
#files, #listings { min-width:900px; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line); vertical-align:middle; white-space:nowrap; }
th.sort { cursor:pointer; user-select:none; }
th.sort:hover { text-decoration:underline; }
th.sorted::after { content:" \25BE"; }
th.sorted.asc::after { content:" \25B4"; }
td.num, th.num { text-align:right; }
td.name { max-width:340px; overflow:hidden; text-overflow:ellipsis; }
th.name { text-align:left; }
td.name a { color:inherit; }
/* The name stays in view while the rest of a wide table scrolls under it. */
#files td.name, #files th.name, #listings td.name, #listings th.name { position:sticky; left:0; background:var(--bg); z-index:1; }
th.cov { width:40%; }
tr.origin th { background:var(--group); font-size:13px; padding-top:8px; }
tr.folder td { color:var(--muted); font-size:12px; padding:3px 8px; background:var(--panel); }
tr.origin .lbl, tr.folder .lbl { position:sticky; left:8px; }
tr.target > td, #files tr.target > td.name, #listings tr.target > td.name { background:var(--target); }
.bar { position:relative; height:14px; min-width:160px; width:100%; background:var(--empty); border-radius:3px; overflow:hidden; }
.seg { position:absolute; top:0; bottom:0; min-width:1px; }
.seg.cached { background:var(--cached); }
.seg.fetching { background:var(--fetching); }
.legend span { display:inline-block; width:10px; height:10px; border-radius:2px; margin:0 4px 0 10px; vertical-align:-1px; }
tr.detail td { background:var(--panel); white-space:normal; }
/* Details stay as wide as the screen, not the table, so they read without scrolling sideways. */
tr.detail dl { position:sticky; left:8px; max-width:min(1200px, calc(100vw - 48px)); display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:4px 0; }
tr.detail dt { color:var(--muted); }
tr.detail dd { margin:0; word-break:break-all; }
.muted { color:var(--muted); }
.err { color:var(--err); }
.stale { color:var(--err); font-weight:600; }
@media (max-width: 720px) {
  header { padding:8px; }
  main { padding:6px 8px 20px; }
  td.name { max-width:150px; }
  .bar { min-width:120px; }
  th.cov { width:auto; }
  th, td { padding:4px 5px; }
  tr.detail dl { grid-template-columns:1fr; max-width:calc(100vw - 32px); }
  tr.detail dd { margin-bottom:4px; }
  /* A URL or cause in full over several lines, rather than a table wider than the phone. */
  #fetches td.name, #errors td { white-space:normal; word-break:break-all; max-width:none; }
}
</style>
</head>
<body>
<header><h1>httpcachefs</h1><span class="meta" id="meta">loading…</span><span class="meta" id="state"></span></header>
<main>
<section id="banners"><div id="offline" hidden></div></section>
<section class="cards" id="cards"></section>
<h2 id="files-title">Files <span class="legend muted"><span style="background:var(--cached)"></span>cached<span style="background:var(--fetching)"></span>fetching now<span style="background:var(--empty)"></span>not cached</span></h2>
<div class="scroll"><table id="files">
<thead><tr>
<th class="sort name" data-key="name">File</th>
<th class="sort num" data-key="size">Size</th>
<th class="sort num" data-key="cached">Cached</th>
<th class="cov">Coverage</th>
<th class="num">Mount reads</th>
<th class="num">Proxy reads</th>
<th class="sort" data-key="access">Last access</th>
</tr></thead>
<tbody></tbody></table></div>
<h2 id="listings-title">Directory listings <span class="count" id="listings-count"></span></h2>
<div class="scroll"><table id="listings"><thead><tr><th class="name">Listing</th><th>Origin</th><th class="num">Size</th><th>Validated</th><th>Last access</th><th>Errors</th></tr></thead><tbody></tbody></table></div>
<h2>Fetches in flight</h2>
<div class="scroll"><table id="fetches"><thead><tr><th class="name">URL</th><th>Range</th><th class="num">Received</th><th class="num">Rate</th><th>Class</th><th class="num">Age</th></tr></thead><tbody></tbody></table></div>
<h2>Doors</h2>
<div class="scroll"><table id="doors"><thead><tr><th>Kind</th><th>Where</th><th>Bind</th><th>Token required</th></tr></thead><tbody></tbody></table></div>
<h2 id="tier-title" hidden>Tier</h2>
<div class="scroll" id="tier-box" hidden><table id="tier"><thead><tr><th>Node</th><th class="num wide">Bytes</th><th class="num">Errors</th><th>State</th></tr></thead><tbody></tbody></table></div>
<h2 id="recent-errors">Recent errors</h2>
<div class="scroll"><table id="errors"><thead><tr><th>Time</th><th class="name">URL</th><th>Range</th><th>Status / cause</th></tr></thead><tbody></tbody></table></div>
</main>
<script>
"use strict";
// `scrollTo`: a row to scroll into view once it is drawn (the page was opened at `#URL`).
let sortKey = "access", sortAsc = false, open = new Set(), last = null, scrollTo = null;
const $ = (s) => document.querySelector(s);
/// Errors newer than this (ms) raise the banner.
const recentErrorWindow = 15 * 60 * 1000;
// Bidirectional controls (U+202A-202E, U+2066-2069, U+200E/F, U+061C) reorder the text after
// them: "a\u202Efdp.exe" reads "aexe.pdf". Every text and tooltip shows them as a visible mark
// instead (the mount skips such names altogether).
const bidiControls = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
function visible(s) {
  return String(s).replace(bidiControls, c => "[U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "]");
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") e.style.cssText = v; else if (k === "text") e.textContent = visible(v);
    else e.setAttribute(k, k === "title" ? visible(v) : v);
  }
  for (const k of kids) if (k != null) e.append(typeof k === "string" ? visible(k) : k);
  return e;
}
function bytes(n) {
  if (n == null) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 2 : 1) : n) + " " + u[i];
}
function ago(iso) {
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (!isFinite(s) || s > 1e9) return "never";
  if (s < 60) return Math.max(0, Math.round(s)) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}
function duration(s) {
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
}
const fraction = (f) => f.length ? f.cachedBytes / f.length : 0;
function range(a, b) { return a + "–" + (b == null || b < 0 ? "end" : b); }
function card(k, v, extra) { return el("div", {class: "card"}, el("div", {class: "k", text: k}), el("div", {class: "v", text: v}), extra); }
// A document from an older daemon has no origin/folder/kind: work them out from the URL.
function place(f) {
  if (f.origin != null && f.folder != null) return f;
  let u = null; try { u = new URL(f.url); } catch (e) {}
  const path = u ? u.pathname : "/";
  return Object.assign({}, f, {origin: u ? u.origin : f.url, folder: decodeURIComponent(path.slice(0, path.lastIndexOf("/") + 1)) || "/",
    kind: path.endsWith("/") || /^text\/html/i.test(f.contentType || "") ? "listing" : "file"});
}
// The file's name as the row shows it: its last segment, and a sign that a query follows.
function shortName(f) { return f.name + (f.url.includes("?") ? " ?…" : ""); }
/// A banner at the top of the page: `kind` is its class (e.g. "errors"), `title` in bold.
function banner(kind, title, text, link) {
  return el("div", {class: "banner " + kind, role: "alert"}, el("b", {text: title}), el("span", {class: "detail", text: text}), link);
}
function coverage(f) {
  const len = f.length || Math.max(1, ...f.cachedRanges.map(r => r[1]));
  const bar = el("div", {class: "bar", "data-cached-fraction": fraction(f).toFixed(6), title: f.cachedRanges.length + " cached ranges"});
  const seg = (cls, a, b) => bar.append(el("div", {class: "seg " + cls, style: "left:" + (100 * a / len) + "%;width:" + (100 * (b - a) / len) + "%"}));
  for (const [a, b] of f.cachedRanges) seg("cached", a, b);
  for (const [a, b] of f.fetchingRanges) seg("fetching", a, b < 0 ? len : Math.min(b, len));
  return bar;
}
function detail(f, columns) {
  const dl = el("dl");
  const row = (k, v) => dl.append(el("dt", {text: k}), el("dd", {}, v));
  row("URL", f.url);
  if (f.finalURL !== f.url) row("Final URL", f.finalURL);
  if (f.proxyPath) row("Proxy URL", el("a", {href: new URL(f.proxyPath, location.href).href, text: new URL(f.proxyPath, location.href).href}));
  row("Length", f.length == null ? "unknown" : f.length + " bytes (" + bytes(f.length) + ")");
  row("Cached", f.cachedBytes + " bytes in " + f.cachedRanges.length + " ranges");
  row("Ranges", f.cachedRanges.length ? f.cachedRanges.map(r => range(r[0], r[1] - 1)).join(", ") : "none");
  if (f.fetchingRanges.length) row("Fetching", f.fetchingRanges.map(r => range(r[0], r[1] < 0 ? -1 : r[1] - 1)).join(", "));
  row("ETag", f.etag || "none");
  row("Last-Modified", f.lastModified || "none");
  row("Content-Type", f.contentType || "none");
  row("Generation", String(f.generation));
  row("Validated", ago(f.validatedAt));
  row("Hits / misses", f.hits + " / " + f.misses + " (from cache " + bytes(f.bytesFromCache) + ", from origin " + bytes(f.bytesFromOrigin) + ")");
  row("Reads since start", "mount " + f.reads.fuse + ", proxy " + f.reads.proxy + ", other " + f.reads.cli);
  row("Errors", f.errors.length ? el("div", {class: "err"}, ...f.errors.map(e => el("div", {text: e}))) : "none");
  return el("tr", {class: "detail", "data-detail-of": f.url}, el("td", {colspan: String(columns)}, dl));
}
// A name that opens (or closes) its row's details, and is the row's deep link.
function nameLink(f, text) {
  const a = el("a", {href: "#" + encodeURIComponent(f.url), title: f.url, text: text});
  a.onclick = (e) => { e.preventDefault(); open.has(f.url) ? open.delete(f.url) : open.add(f.url); history.replaceState(null, "", "#" + encodeURIComponent(f.url)); draw(last); };
  return a;
}
// Files by origin, then folder (both in name order), each folder's files in the chosen order.
function drawFiles(files) {
  const value = {name: f => f.name.toLowerCase(), size: f => f.length || 0, cached: fraction, access: f => Date.parse(f.lastAccess)};
  const sorted = files.slice().sort((a, b) => { const x = value[sortKey](a), y = value[sortKey](b); return (x < y ? -1 : x > y ? 1 : 0) * (sortAsc ? 1 : -1); });
  const groups = new Map();
  for (const f of sorted) {
    if (!groups.has(f.origin)) groups.set(f.origin, new Map());
    const folders = groups.get(f.origin);
    if (!folders.has(f.folder)) folders.set(f.folder, []);
    folders.get(f.folder).push(f);
  }
  const body = el("tbody");
  for (const origin of [...groups.keys()].sort()) {
    const folders = groups.get(origin);
    const all = [...folders.values()].flat();
    body.append(el("tr", {class: "origin", "data-origin": origin}, el("th", {colspan: "7"}, el("span", {class: "lbl"}, origin + " ",
      el("span", {class: "muted", text: all.length + (all.length === 1 ? " file · " : " files · ") + bytes(all.reduce((n, f) => n + f.cachedBytes, 0)) + " cached"})))));
    for (const folder of [...folders.keys()].sort()) {
      body.append(el("tr", {class: "folder", "data-folder": folder}, el("td", {colspan: "7"}, el("span", {class: "lbl", text: folder}))));
      for (const f of folders.get(folder)) {
        body.append(el("tr", {"data-url": f.url, class: open.has(f.url) ? "target" : ""},
          el("td", {class: "name"}, nameLink(f, shortName(f))),
          el("td", {class: "num", text: bytes(f.length)}),
          el("td", {class: "num", text: (100 * fraction(f)).toFixed(1) + " %"}),
          el("td", {}, coverage(f)),
          el("td", {class: "num", text: String(f.reads.fuse)}),
          el("td", {class: "num", text: String(f.reads.proxy)}),
          el("td", {text: ago(f.lastAccess)})));
        if (open.has(f.url)) body.append(detail(f, 7));
      }
    }
  }
  if (!files.length) body.append(el("tr", {}, el("td", {colspan: "7", class: "muted", text: "No files are cached."})));
  $("#files tbody").replaceWith(body);
  for (const th of document.querySelectorAll("th.sort")) {
    th.classList.toggle("sorted", th.dataset.key === sortKey);
    th.classList.toggle("asc", th.dataset.key === sortKey && sortAsc);
  }
}
function drawListings(listings) {
  const body = el("tbody");
  const sorted = listings.slice().sort((a, b) => a.url < b.url ? -1 : a.url > b.url ? 1 : 0);
  for (const f of sorted) {
    let path = f.url; try { path = decodeURIComponent(new URL(f.url).pathname); } catch (e) {}
    body.append(el("tr", {"data-url": f.url, class: open.has(f.url) ? "target" : ""},
      el("td", {class: "name"}, nameLink(f, path)),
      el("td", {text: f.origin}),
      el("td", {class: "num", text: bytes(f.length == null ? f.cachedBytes : f.length)}),
      el("td", {text: ago(f.validatedAt)}),
      el("td", {text: ago(f.lastAccess)}),
      el("td", {class: f.errors.length ? "err" : "muted", text: f.errors.length ? f.errors[0] : "none"})));
    if (open.has(f.url)) body.append(detail(f, 6));
  }
  if (!listings.length) body.append(el("tr", {}, el("td", {colspan: "6", class: "muted", text: "No directory listings are cached."})));
  $("#listings tbody").replaceWith(body);
  $("#listings-count").textContent = listings.length ? "(" + listings.length + ")" : "";
}
// Each cell takes its column header's class (num: right-aligned under a right-aligned header;
// name: cut with an ellipsis, whole in its tooltip).
function fill(id, rows, empty) {
  const heads = [...document.querySelectorAll(id + " thead th")];
  const body = el("tbody");
  for (const r of rows) body.append(el("tr", {}, ...r.map((c, i) => {
    const cls = heads[i] ? heads[i].className : "";
    const td = el("td", cls ? {class: cls} : {});
    if (c instanceof Node) td.append(c); else { td.textContent = visible(c); if (cls === "name") td.title = visible(c); }
    return td;
  })));
  if (!rows.length) body.append(el("tr", {}, el("td", {colspan: String(heads.length), class: "muted", text: empty})));
  $(id + " tbody").replaceWith(body);
}
// The cause without what its row shows already: the URL at its end, a status it names itself.
function cause(e) {
  let c = e.cause.endsWith(": " + e.url) ? e.cause.slice(0, -(e.url.length + 2)) : e.cause;
  return e.status && !c.includes("HTTP " + e.status) ? "HTTP " + e.status + ": " + c : c;
}
// Banners: errors of the last minutes, newest named, with a link down to the full list.
function drawBanners(doc) {
  const now = Date.now(), recent = doc.errors.filter(e => now - Date.parse(e.time) < recentErrorWindow);
  const banners = [];
  for (const o of doc.originsDown || []) {
    const b = banner("errors", "Origin down: " + o.origin, "since " + new Date(o.since).toLocaleTimeString() + " (" + o.lastError
      + "); serving what the cache holds, other reads fail at once until it answers.");
    if (!banners.length) b.id = "offline";
    banners.push(b);
  }
  if (recent.length) {
    const e = recent[0], urls = new Set(recent.map(e => e.url)).size;
    const more = el("a", {href: "#recent-errors", text: "all errors ↓"});
    more.onclick = (ev) => { ev.preventDefault(); $("#recent-errors").scrollIntoView({block: "start"}); };
    banners.push(banner("errors", recent.length + (recent.length === 1 ? " error" : " errors") + " in the last " + (recentErrorWindow / 60000) + " min"
      + (urls > 1 ? " (" + urls + " URLs)" : "") + ".", "Latest, " + ago(e.time) + ": " + cause(e) + " — " + e.url, more));
  }
  $("#banners").replaceChildren(...banners);
}
function draw(doc) {
  if (!doc) return;
  const c = doc.cache, t = doc.totals;
  $("#meta").textContent = "version " + doc.version + " · pid " + doc.pid + " · up " + duration(doc.uptimeSeconds) + (c.directory ? " · " + visible(c.directory) : "");
  const use = el("div", {class: "usebar"}, el("div", {class: "used", style: "width:" + Math.min(100, 100 * c.usedBytes / Math.max(1, c.capacityBytes)) + "%"}));
  drawBanners(doc);
  $("#cards").replaceChildren(
    card("Cached, cap " + bytes(c.capacityBytes), bytes(c.usedBytes), use),
    card("Free space, floor " + bytes(c.freeFloorBytes), bytes(c.filesystemFreeBytes)),
    card("Files · slices", c.files + " · " + c.slices),
    card("Hit ratio", c.hitRatio == null ? "–" : (100 * c.hitRatio).toFixed(1) + " %"),
    card("Served from cache", bytes(t.servedFromCache)),
    card("Served from origin", bytes(t.servedFromOrigin)),
    card("Origin bytes", bytes(t.originBytes)),
    card("Fetches in flight", String(doc.fetches.length)),
    // Reads by reader class (scanner, player, unknown, background): what each kind of program
    // read, and what it cost the origin.
    ...Object.entries(t.readers || {}).filter(([, r]) => r.reads > 0).map(([name, r]) =>
      card("Read by " + name + " programs", bytes(r.fromCache + r.fromOrigin),
        el("div", {class: "k", text: r.reads + " reads · " + r.fetches + " origin requests for " + bytes(r.fetchedBytes)}))));
  const entries = doc.files.map(place);
  drawFiles(entries.filter(f => f.kind !== "listing"));
  drawListings(entries.filter(f => f.kind === "listing"));
  fill("#fetches", doc.fetches.map(f => [f.url, range(f.start, f.end == null ? -1 : f.end - 1), bytes(f.bytes), bytes(f.bytesPerSecond) + "/s", f.priority || "", duration(f.ageSeconds)]), "Nothing is being fetched.");
  if (doc.tier) {
    document.getElementById("tier-title").hidden = false;
    document.getElementById("tier-box").hidden = false;
    fill("#tier", doc.tier.nodes.map(n => [n.node, bytes(n.bytes), String(n.errors), n.backedOff ? "skipped (back-off)" : "ok"])
      .concat([["origin (checks, fallbacks)", bytes(doc.tier.originBytes), "", ""]]), "No node.");
  }
  fill("#doors", doc.doors.map(d => d.kind === "mount" ? ["mount", d.mountpoint, "", ""] : ["proxy", "port " + d.port, d.bindAddress, d.tokenRequired ? "yes" : "no"]), "No mount or proxy.");
  fill("#errors", doc.errors.map(e => [new Date(e.time).toLocaleString(), e.url, e.start == null ? "open" : range(e.start, e.end), cause(e)]), "No errors.");
  if (scrollTo) {
    const row = [...document.querySelectorAll("tr[data-url]")].find(r => r.dataset.url === scrollTo);
    // `data-scrolled-to` and `data-row-top` (px from the top of the window, whose height is
    // `data-view-height`) say to tests and scripts where the page scrolled.
    if (row) {
      row.scrollIntoView({block: "center"});
      Object.assign(document.body.dataset, {scrolledTo: scrollTo, rowTop: Math.round(row.getBoundingClientRect().top), viewHeight: innerHeight});
      scrollTo = null;
    }
  }
}
async function refresh() {
  try {
    const r = await fetch("status.json", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    last = await r.json();
    draw(last);
    $("#state").textContent = "updated " + new Date().toLocaleTimeString();
    $("#state").className = "meta";
  } catch (e) {
    $("#state").textContent = "not updated: " + e.message;
    $("#state").className = "meta stale";
  }
}
for (const th of document.querySelectorAll("th.sort")) {
  th.onclick = () => { if (sortKey === th.dataset.key) sortAsc = !sortAsc; else { sortKey = th.dataset.key; sortAsc = sortKey === "name"; } draw(last); };
}
// A link to `#URL` (a row's name) opens that row's details and scrolls it into view.
function followHash() {
  if (location.hash.length <= 1 || location.hash === "#recent-errors") return;
  let url = location.hash.slice(1); try { url = decodeURIComponent(url); } catch (e) {}
  open.add(url); scrollTo = url; draw(last);
}
window.addEventListener("hashchange", followHash);
followHash();
refresh();
setInterval(refresh, 3000);
</script>
</body>
</html>
"""#
}
