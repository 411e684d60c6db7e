/// The status page at `/.httpcachefs/`: one self-contained HTML document (CSS and a small script
/// inline, nothing fetched from elsewhere) that draws `status.json` (a relative URL, so the same
/// page works under a token prefix) and redraws it 3 seconds after each drawing, without reloading.
///
/// Built for libraries of 100k files: what it polls is the summary (`status.json?view=summary`:
/// totals, transfers, errors, origins, folder totals; no file), whose size does not grow with the
/// number of files; a folder's files are fetched a page at a time (`?folder=ID&page=N`) only while
/// that folder is open. The page's work per poll is the same at 100 files and at 100k.
///
/// Layout, top to bottom: banners (`#banners`, one `div.banner` each: origins down, egress
/// budgets spent or nearly so, recent errors), summary cards (each with a line on what it counts;
/// `#bandwidth`: the `--bwlimit` in force and its next change), what is happening now (`#now`: fetches in flight, recent errors,
/// what each reader class read, fetched and wasted (`#readers`, a row `tr[data-reader]` each),
/// each origin's requests a second and egress budget (`#origins`, `tr[data-origin]`), the
/// tier), then the files: a filter box (`#filter`: a substring of names and URLs, matched by the
/// daemon; kept in the address as `?filter=`) and a choice of mount (`#mount`: the filter set to
/// the first URL a mount serves; each folder names the mounts serving it, `.mounts`), folders grouped by origin (`tr.origin`), each folder a row with its totals
/// (`tr.folder`; collapsed, but all open in a cache of at most 50 files or one folder) that opens
/// onto a page of its files (`tr.folder-files`, with a pager),
/// then the doors. At phone width (<= 720 px) secondary columns (`.secondary`) are hidden, so
/// what matters (name, cached, coverage) fits without scrolling sideways.
///
/// Coverage bars are drawn to scale: each cached range is a segment whose `left` and `width` are
/// its offset and length as percentages of the file; ranges being fetched now are segments of
/// another colour. Rows carry `data-url`, bars `data-cached-fraction`, so tests (and scripts) can
/// find them in the rendered DOM. A file's name (its full URL on hover) links to `#URL`, which
/// opens its details (all ranges, validators, generation, errors, proxy URL); a page opened at
/// `#URL` asks for the page of its folder that holds it (`?url=URL`), opens that row and scrolls
/// it into view. The files of a folder sort by a click on a header (done by the daemon, over the
/// whole folder). Owner-only like the document: the address `httpcachefs status` prints carries
/// the control key (`?key=`, kept in the address as the filter is), which the script sends as
/// `X-Httpcachefs-Control` with each request for the document; under a token prefix the token
/// is the proof. Text from outside (names, URLs, causes) goes in as text, never as markup, and
/// characters that reorder text (bidi controls) are shown as visible marks.
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
.card .hint { color:var(--muted); font-size:11px; margin-top:2px; }
.card .v { font-size:17px; font-variant-numeric:tabular-nums; white-space:nowrap; }
.usebar { position:relative; height:10px; background:var(--empty); border-radius:3px; margin-top:6px; overflow:hidden; }
.usebar .used { position:absolute; left:0; top:0; bottom:0; background:var(--cached); }
.scroll { overflow-x:auto; -webkit-overflow-scrolling:touch; }
table { border-collapse:separate; border-spacing:0; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line); vertical-align:middle; white-space:nowrap; }
th.sort { cursor:pointer; user-select:none; }
th.sort:hover { text-decoration:underline; }
th.sorted::after { content:" \25BE"; }
th.sorted.asc::after { content:" \25B4"; }
td.num, th.num { text-align:right; }
td.name { max-width:420px; overflow:hidden; text-overflow:ellipsis; }
th.name { text-align:left; }
td.name a { color:inherit; }
th.cov { width:35%; }
tr.origin th { background:var(--group); font-size:13px; padding-top:8px; }
tr.folder td { background:var(--panel); }
tr.folder td.name button { all:unset; cursor:pointer; display:block; white-space:normal; overflow-wrap:anywhere; }
tr.folder td.name button::before { content:"\25B8  "; color:var(--muted); }
tr.folder.open td.name button::before { content:"\25BE  "; }
tr.folder-files > td { padding:0 0 8px 14px; background:var(--panel); }
tr.folder-files table { background:var(--bg); table-layout:auto; }
.pager { display:flex; gap:12px; align-items:center; padding:6px 8px; color:var(--muted); }
.pager button { font:inherit; }
.toolbar { display:flex; flex-wrap:wrap; gap:6px 12px; align-items:center; margin:4px 0 8px; }
#filter { font:inherit; padding:5px 8px; border:1px solid var(--line); border-radius:6px; width:min(360px, 100%); }
tr.target > td { background:var(--target); }
.bar { position:relative; height:14px; min-width:120px; width:100%; background:var(--empty); border-radius:3px; overflow:hidden; }
.seg { position:absolute; top:0; bottom:0; min-width:1px; }
.seg.cached { background:var(--cached); }
.seg.fetching { background:var(--fetching); }
.legend span { display:inline-block; width:10px; height:10px; border-radius:2px; margin:0 4px 0 10px; vertical-align:-1px; }
tr.detail td { background:var(--panel); white-space:normal; }
tr.detail dl { max-width:min(1200px, calc(100vw - 48px)); display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:4px 0; }
tr.detail dt { color:var(--muted); }
tr.detail dd { margin:0; word-break:break-all; }
.kind { color:var(--muted); font-size:12px; margin-left:4px; }
.mounts { display:block; font-size:12px; white-space:normal; overflow-wrap:anywhere; }
#mount { font:inherit; padding:4px 6px; border:1px solid var(--line); border-radius:6px; max-width:100%; }
.muted { color:var(--muted); }
p.note { font-size:12px; margin:4px 0 0; }
.err { color:var(--err); }
.stale { color:var(--err); font-weight:600; }
@media (max-width: 720px) {
  header { padding:8px; }
  main { padding:6px 8px 20px; }
  /* What matters stays (name, cached, coverage); the rest is in a file's details. */
  .secondary { display:none; }
  th, td { padding:4px 5px; }
  /* Three small cards a row, so the fetches, errors and folders start within the first screen. */
  .cards { grid-template-columns:repeat(3, minmax(0, 1fr)); gap:6px; }
  .card { padding:6px 7px; }
  .card .k { font-size:11px; }
  .card .v { font-size:15px; white-space:normal; overflow-wrap:anywhere; }
  /* A folder's files take the screen's width, never their content's: a long name is cut
     (whole in its details), details wrap. */
  #folders, table.files { table-layout:fixed; }
  /* Hidden cells take no place in their row, so the three shown fill the first three columns;
     the last two (there for the rows that span five) take no width. */
  #folders col.minor { width:0; }
  #folders col.count { width:5.5em; }
  table.files th.num { width:5em; }
  table.files th.cov { width:28%; }
  td.name { max-width:none; }
  /* A folder's name wraps (whole, never cut): its path is what tells folders apart. */
  tr.folder td.name { white-space:normal; overflow-wrap:anywhere; }
  .card .hint { font-size:10px; }
  /* Group headers wrap rather than widen the table. */
  tr.origin th { white-space:normal; }
  #folders td.num { overflow:hidden; text-overflow:ellipsis; }
  tr.folder-files > td { padding-left:4px; }
  .bar { min-width:56px; }
  th.cov { width:30%; }
  /* As wide as its row, no wider (100vw counts the scroll bar, and the frames around it). */
  tr.detail dl { grid-template-columns:1fr; max-width:none; }
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
<section id="now">
<h2 id="fetches-title">Fetching now <span class="count" id="fetches-count"></span></h2>
<div class="scroll"><table id="fetches"><thead><tr><th class="name">URL</th><th class="secondary">Range</th><th class="num">Received</th><th class="num">Rate</th><th class="secondary">Class</th><th class="num secondary">Age</th></tr></thead><tbody></tbody></table></div>
<h2 id="recent-errors">Recent errors <span class="count" id="errors-count"></span></h2>
<div class="scroll"><table id="errors"><thead><tr><th>Time</th><th class="name">URL</th><th class="secondary">Range</th><th>Status / cause</th></tr></thead><tbody></tbody></table></div>
<h2 id="readers-title">What each kind of program costs <span class="count">since start</span></h2>
<div class="scroll"><table id="readers"><thead><tr><th>Programs</th><th class="num">Read</th><th class="num">Fetched</th><th class="num">Wasted</th><th class="num secondary">Reads</th><th class="num secondary">Requests</th></tr></thead><tbody></tbody></table></div>
<p class="muted note">Read: bytes the programs got (from the cache or the origin). Fetched: bytes the origin sent for their reads and read-ahead. Wasted: fetched bytes that left the cache without any program reading them (kept in memory: bytes cached before the start count as neither). "open": an open's first request, made before the program's kind is known.</p>
<h2 id="origins-title">Origins <span class="count" id="origins-note"></span></h2>
<div class="scroll"><table id="origins"><thead><tr><th class="name">Origin</th><th class="num">Requests/s</th><th class="num secondary">Requests</th><th class="num secondary">Bytes</th><th class="num">Budget used</th><th class="num">Left</th><th class="secondary">Resets</th></tr></thead><tbody></tbody></table></div>
<h2 id="tier-title" hidden>Tier</h2>
<div class="scroll" id="tier-box" hidden><table id="tier"><thead><tr><th>Node</th><th class="num wide">Bytes</th><th class="num">Errors</th><th>State</th></tr></thead><tbody></tbody></table></div>
</section>
<h2 id="files-title">Files <span class="count" id="files-count"></span> <span class="legend muted"><span style="background:var(--cached)"></span>cached<span style="background:var(--fetching)"></span>fetching now<span style="background:var(--empty)"></span>not cached</span></h2>
<div class="toolbar"><input id="filter" type="search" placeholder="Filter names and URLs" aria-label="Filter names and URLs" autocomplete="off"><select id="mount" aria-label="Files of one mount" hidden><option value="">All mounts and the proxy</option></select><span class="muted" id="folders-note"></span></div>
<table id="folders">
<colgroup><col><col class="count"><col class="count"><col class="minor"><col class="minor"></colgroup>
<thead><tr><th class="name">Folder</th><th class="num">Files</th><th class="num secondary">Size</th><th class="num">Cached</th><th class="num secondary">Pinned</th></tr></thead>
<tbody></tbody></table>
<h2>Doors</h2>
<div class="scroll"><table id="doors"><thead><tr><th>Kind</th><th class="name">Where</th><th class="name secondary">Serves / bind</th><th class="secondary">Token required</th></tr></thead><tbody></tbody></table></div>
</main>
<script>
"use strict";
// The summary last polled; per open folder (by id) the page asked for and the last answer to it;
// the files whose details are open; the order of every folder's files; the filter.
let summary = null, openFolders = new Map(), pages = new Map(), open = new Set(), order = "name", filter = "";
// `scrollTo`: a row to scroll into view once it is drawn (the page was opened at `#URL`).
let scrollTo = null;
// The folders the reader closed: a small cache's folders open by themselves (`small`), but not these.
const closed = new Set();
/// A cache of at most this many files shows every folder open.
const openAllFiles = 50;
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
/// The recent errors shown before "show all".
const errorsShown = 10;
let allErrors = false;
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") e.style.cssText = v; else if (k === "text") e.append(...shown(v));
    else e.setAttribute(k, k === "title" ? visible(v) : v);
  }
  for (const k of kids) if (k != null) e.append(typeof k === "string" ? visible(k) : k);
  return e;
}
// Text as nodes for `append`, each bidi control a visible mark (`visible`).
function shown(text) { return [visible(text)]; }
function bytes(n) {
  if (n == null) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 2 : 1) : Math.round(n)) + " " + u[i];   // a rate: whole bytes
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
// A fetch's class (`FetchPriority`'s code in the document) by the name `httpcachefs status` gives it.
const classNames = {0: "waiting", 5: "waited scan", 1: "near", 2: "far", 3: "scan", 4: "preload"};
const className = (p) => p == null ? "" : (classNames[p] || String(p));
const fraction = (f) => f.length ? f.cachedBytes / f.length : 0;
const percent = (a, b) => b > 0 ? (100 * a / b).toFixed(1) + " %" : "–";
function range(a, b) { return a + "–" + (b == null || b < 0 ? "end" : b); }
// A summary figure: its name, its value, one line on what it counts (`hint`), and anything else.
function card(k, v, hint, extra) { return el("div", {class: "card"}, el("div", {class: "k", text: k}), el("div", {class: "v", text: v}), hint ? el("div", {class: "hint", text: hint}) : null, extra); }
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
  const row = (k, v) => dl.append(el("dt", {text: k}), el("dd", {}, ...(v instanceof Node ? [v] : shown(v))));
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
  row("Last access", ago(f.lastAccess));
  row("Hits / misses", f.hits + " / " + f.misses + " (from cache " + bytes(f.bytesFromCache) + ", from origin " + bytes(f.bytesFromOrigin) + ")");
  row("Reads since start", "mount " + f.reads.fuse + ", proxy " + f.reads.proxy + ", other " + f.reads.cli);
  row("Errors", f.errors.length ? el("div", {class: "err"}, ...f.errors.map(e => el("div", {text: e}))) : "none");
  return el("tr", {class: "detail", "data-detail-of": f.url}, el("td", {colspan: String(columns)}, dl));
}
// A name that opens (or closes) its row's details, and is the row's deep link.
function nameLink(f, text) {
  const a = el("a", {href: "#" + encodeURIComponent(f.url), title: f.url, text: text});
  a.onclick = (e) => { e.preventDefault(); open.has(f.url) ? open.delete(f.url) : open.add(f.url); history.replaceState(null, "", "#" + encodeURIComponent(f.url)); drawFolders(); };
  return a;
}
function query(params) { return "status.json?" + new URLSearchParams(params).toString(); }
// The owner's key, from the page's address ('httpcachefs status' prints it with `?key=`): sent
// with each request for the document as a header, never in its URL.
const ownerKey = new URLSearchParams(location.search).get("key");
async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store", headers: ownerKey ? {"X-Httpcachefs-Control": ownerKey} : {}});
  if (r.status === 404) return null;
  if (!r.ok) throw new Error("HTTP " + r.status + ": " + (await r.text()).trim());
  return r.json();
}
// One page of an open folder's files, asked of the daemon (it filters and sorts the whole folder).
async function loadPage(id) {
  const doc = await getJSON(query({folder: id, page: openFolders.get(id), filter: filter, order: order}));
  if (doc && doc.page) pages.set(id, doc); else { openFolders.delete(id); pages.delete(id); }
}
const filesHeader = [["File", "name sort", "name"], ["Size", "num sort secondary", "size"], ["Cached", "num sort", "cached"], ["Coverage", "cov"],
  ["Mount reads", "num secondary"], ["Proxy reads", "num secondary"], ["Last access", "sort secondary", "access"]];
// The open folder's files: one table, one page, a pager under it.
function folderFiles(folder, doc) {
  const p = doc.page, thead = el("tr");
  for (const [label, cls, key] of filesHeader) {
    const th = el("th", {class: cls + (key && key === order ? " sorted" + (order === "name" ? " asc" : "") : ""), text: label});
    if (key) th.onclick = async () => { order = key; await Promise.all([...openFolders.keys()].map(loadPage)); drawFolders(); };
    thead.append(th);
  }
  const body = el("tbody");
  for (const f of doc.files) {
    const listing = f.kind === "listing";
    body.append(el("tr", {"data-url": f.url, class: open.has(f.url) ? "target" : ""},
      el("td", {class: "name"}, nameLink(f, shortName(f)), listing ? el("span", {class: "kind", text: "listing"}) : null),
      el("td", {class: "num secondary", text: bytes(f.length == null && listing ? f.cachedBytes : f.length)}),
      el("td", {class: "num", text: (100 * fraction(f)).toFixed(1) + " %"}),
      el("td", {class: "cov"}, coverage(f)),
      el("td", {class: "num secondary", text: String(f.reads.fuse)}),
      el("td", {class: "num secondary", text: String(f.reads.proxy)}),
      el("td", {class: "secondary", text: ago(f.lastAccess)})));
    if (open.has(f.url)) body.append(detail(f, filesHeader.length));
  }
  const turn = (to) => async () => { openFolders.set(folder.id, to); await loadPage(folder.id); drawFolders(); };
  const prev = el("button", {type: "button", text: "‹ previous"}), next = el("button", {type: "button", text: "next ›"});
  prev.disabled = p.page <= 0; next.disabled = p.page + 1 >= p.pages;
  prev.onclick = turn(p.page - 1); next.onclick = turn(p.page + 1);
  const first = p.page * p.pageSize;
  const pager = el("div", {class: "pager", "data-page": String(p.page), "data-pages": String(p.pages)}, prev,
    el("span", {text: "files " + Math.min(first + 1, p.matching) + "–" + Math.min(first + p.pageSize, p.matching) + " of " + p.matching + " · page " + (p.page + 1) + " of " + Math.max(1, p.pages)}), next);
  return el("tr", {class: "folder-files", "data-files-of": folder.id}, el("td", {colspan: "5"},
    el("table", {class: "files"}, el("thead", {}, thead), body), p.pages > 1 ? pager : null));
}
// Folders by origin, each a row with its totals; an open folder is followed by its page of files.
function drawFolders() {
  if (!summary) return;
  const folders = summary.folders || [], body = el("tbody");
  let origin = null, sameMounts = null;
  for (const folder of folders) {
    if (folder.origin !== origin) {
      origin = folder.origin;
      const mine = folders.filter(f => f.origin === origin), files = mine.reduce((n, f) => n + f.files + f.listings, 0);
      // The mounts serving this origin's folders: said once here when they are the same for all.
      const served = mine.map(f => mountsOf(f).join(", "));
      sameMounts = served.every(m => m === served[0]) ? served[0] : null;
      body.append(el("tr", {class: "origin", "data-origin": origin}, el("th", {colspan: "5", text: origin + " "},
        el("span", {class: "muted", text: files + (files === 1 ? " file · " : " files · ") + bytes(mine.reduce((n, f) => n + f.cachedBytes, 0)) + " cached"
          + (sameMounts ? " · in " + sameMounts : "")}))));
    }
    const isOpen = openFolders.has(folder.id);
    const toggle = el("button", {type: "button", "aria-expanded": String(isOpen), title: folder.origin + folder.path, text: folder.path});
    toggle.onclick = async () => {
      if (openFolders.has(folder.id)) { openFolders.delete(folder.id); pages.delete(folder.id); closed.add(folder.id); } else { closed.delete(folder.id); openFolders.set(folder.id, 0); await loadPage(folder.id); }
      drawFolders();
    };
    // The listings only where there is room: at phone width the column shows the files alone.
    const listings = folder.listings ? el("span", {class: "secondary", text: " + " + folder.listings + (folder.listings === 1 ? " listing" : " listings")}) : null;
    const servedBy = sameMounts === null ? mountsOf(folder) : [];
    body.append(el("tr", {class: "folder" + (isOpen ? " open" : ""), "data-folder": folder.path, "data-folder-id": folder.id},
      el("td", {class: "name"}, toggle, servedBy.length ? el("span", {class: "mounts muted", "data-mounts": servedBy.join("\n"), text: "in " + servedBy.join(", ")}) : null),
      el("td", {class: "num"}, String(folder.files), listings),
      el("td", {class: "num secondary", text: bytes(folder.lengthBytes)}),
      el("td", {class: "num"}, el("span", {class: "secondary", text: bytes(folder.cachedBytes) + " · "}), percent(folder.cachedBytes, folder.lengthBytes)),
      el("td", {class: "num secondary", text: folder.pinnedBytes ? bytes(folder.pinnedBytes) : "–"})));
    if (isOpen && pages.has(folder.id)) body.append(folderFiles(folder, pages.get(folder.id)));
  }
  if (!folders.length) body.append(el("tr", {}, el("td", {colspan: "5", class: "muted", text: filter ? "No file matches the filter." : summary.cache.counting ? "Counting the cache's files since the start: the folders show once they are counted." : "No files are cached."})));
  $("#folders tbody").replaceWith(body);
  const total = summary.foldersTotal || 0;
  $("#folders-note").textContent = (total > folders.length ? folders.length + " of " + total + " folders shown: type in the filter to narrow them" : total + (total === 1 ? " folder" : " folders")) + (filter ? " with matches" : "");
  $("#files-count").textContent = "(" + summary.cache.files + ")";
  // For tests and scripts: how wide the page is drawn against the window without its scroll bar
  // (wider: it scrolls sideways), and then the first element that sticks out.
  const view = document.documentElement.clientWidth, drawn = document.documentElement.scrollWidth;
  // And the most lines a folder's name takes (a long name wraps, whole, rather than being cut).
  const lines = Math.max(0, ...[...document.querySelectorAll("tr.folder td.name button")]
    .map(b => Math.round(b.getBoundingClientRect().height / (parseFloat(getComputedStyle(b).lineHeight) || 20))));
  Object.assign(document.body.dataset, {pageWidth: drawn, viewWidth: view, folderNameLines: lines});
  if (drawn > view) {
    const wide = [...document.querySelectorAll("main *")].find(e => e.getBoundingClientRect().right > view);
    if (wide) document.body.dataset.tooWide = wide.tagName + (wide.id ? "#" + wide.id : "") + (wide.className ? "." + wide.className : "");
  }
  if (scrollTo) {
    const row = [...document.querySelectorAll("tr[data-url]")].find(r => r.dataset.url === scrollTo);
    // `data-scrolled-to` and `data-row-top` (px from the top of the window, whose height is
    // `data-view-height`) say to tests and scripts where the page scrolled.
    if (row) {
      // Down to the row, never sideways: a row wider than a narrow window would otherwise be
      // scrolled to its far edge, cutting off the names on the left.
      row.scrollIntoView({block: "center", inline: "start"});
      const box = row.closest(".scroll");
      if (box) box.scrollLeft = 0;
      document.documentElement.scrollLeft = 0;
      Object.assign(document.body.dataset, {scrolledTo: scrollTo, rowTop: Math.round(row.getBoundingClientRect().top), viewHeight: innerHeight,
        scrolledSideways: (box ? box.scrollLeft : 0) + document.documentElement.scrollLeft});
      scrollTo = null;
    }
  }
}
// Each cell takes its column header's class (num: right-aligned under a right-aligned header;
// name: cut with an ellipsis, whole in its tooltip).
function fill(id, rows, empty) {
  const heads = [...document.querySelectorAll(id + " thead th")];
  const body = el("tbody");
  for (const r of rows) body.append(el("tr", {}, ...r.map((c, i) => {
    const cls = heads[i] ? heads[i].className : "";
    const td = el("td", cls ? {class: cls} : {});
    if (c instanceof Node) td.append(c); else { td.append(...shown(c)); if (cls === "name") td.title = visible(c); }
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
// Banners: origins down, and errors of the last minutes, newest named.
function drawBanners(doc) {
  const now = Date.now(), recent = doc.errors.filter(e => now - Date.parse(e.time) < recentErrorWindow);
  const banners = [];
  for (const o of doc.originsDown || []) {
    const b = banner("errors", "Origin down: " + o.origin, "since " + new Date(o.since).toLocaleTimeString() + " (" + o.lastError
      + "); serving what the cache holds, other reads fail at once until it answers.");
    if (!banners.length) b.id = "offline";
    banners.push(b);
  }
  // An egress budget spent, or near its end (some readers no longer fetch): when it resets.
  for (const b of doc.budgets || []) {
    if (!b.spent && !b.yielding) continue;
    const resets = new Date(b.resetsAt).toLocaleString();
    banners.push(b.spent
      ? banner("errors budget", "Egress budget spent: " + b.origin, b.budget + " used (" + bytes(b.usedBytes) + "); cached files are served, reads that need the origin fail until " + resets + ".")
      : banner("errors budget", "Egress budget nearly spent: " + b.origin, bytes(b.leftBytes) + " of " + b.budget + " left; " + b.yielding + " no longer fetch until " + resets + "."));
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
function drawSummary(doc) {
  const c = doc.cache, t = doc.totals;
  $("#meta").textContent = "version " + doc.version + " · pid " + doc.pid + " · up " + duration(doc.uptimeSeconds) + (c.directory ? " · " + visible(c.directory) : "");
  const use = el("div", {class: "usebar"}, el("div", {class: "used", style: "width:" + Math.min(100, 100 * c.usedBytes / Math.max(1, c.capacityBytes)) + "%"}));
  drawBanners(doc);
  $("#cards").replaceChildren(
    card("Cached, cap " + bytes(c.capacityBytes), bytes(c.usedBytes), "bytes the cache holds now", use),
    card("Free space, floor " + bytes(c.freeFloorBytes), bytes(c.filesystemFreeBytes), "free on the cache's disk; eviction keeps the floor"),
    card("Files · slices", c.files + " · " + c.slices, c.counting ? "still counting the cache's files since the start" : "files with cached bytes · slice files on disk"),
    ...(c.scanShare && c.scanShare.limitBytes > 0 ? [card("Scan share, " + bytes(c.scanShare.limitBytes), bytes(c.scanShare.usedBytes), "slices scanners read (headers, tails), evicted last")] : []),
    card("Hit ratio", c.hitRatio == null ? "–" : (100 * c.hitRatio).toFixed(1) + " %", "reads answered wholly from the cache, since start"),
    card("Served from cache", bytes(t.servedFromCache), "bytes readers got from the cache, since start"),
    card("Served from origin", bytes(t.servedFromOrigin), "bytes readers got from the origin, waiting for them, since start"),
    card("Origin bytes", bytes(t.originBytes), "every byte origins sent since start: reads, read-ahead, warm-up, opens"),
    card("Fetches in flight", String(doc.fetches.length), "transfers from origins running now"),
    // `--bwlimit`: the limit now, and when its timetable changes it next.
    ...(doc.bandwidth ? [bandwidthCard(doc.bandwidth)] : []));
  drawReaders(t.readers || {});
  drawOrigins(doc);
  fill("#fetches", doc.fetches.map(f => [f.url, range(f.start, f.end == null ? -1 : f.end - 1), bytes(f.bytes), bytes(f.bytesPerSecond) + "/s", className(f.priority), duration(f.ageSeconds)]), "Nothing is being fetched.");
  $("#fetches-count").textContent = doc.fetches.length ? "(" + doc.fetches.length + ")" : "";
  const errors = allErrors ? doc.errors : doc.errors.slice(0, errorsShown);
  fill("#errors", errors.map(e => [new Date(e.time).toLocaleString(), e.url, e.start == null ? "open" : range(e.start, e.end), cause(e)]), "No errors.");
  if (doc.errors.length > errorsShown) {
    const more = el("a", {href: "#recent-errors", text: allErrors ? "show fewer" : "show all " + doc.errors.length});
    more.onclick = (ev) => { ev.preventDefault(); allErrors = !allErrors; drawSummary(summary); };
    $("#errors-count").replaceChildren(more);
  } else {
    $("#errors-count").textContent = doc.errors.length ? "(" + doc.errors.length + ")" : "";
  }
  if (doc.tier) {
    $("#tier-title").hidden = false;
    $("#tier-box").hidden = false;
    fill("#tier", doc.tier.nodes.map(n => [n.node, bytes(n.bytes), String(n.errors), n.backedOff ? "skipped (back-off)" : "ok"])
      .concat([["origin (checks, fallbacks)", bytes(doc.tier.originBytes), "", ""]]), "No node.");
  }
  fill("#doors", doc.doors.map(d => d.kind === "mount" ? ["mount", d.mountpoint, (d.urls || []).join(" "), ""] : ["proxy", "port " + d.port, d.bindAddress, d.tokenRequired ? "yes" : "no"]), "No mount or proxy.");
  drawMounts(doc.doors);
}
// By reader class (player, unknown, scanner, background; "open": an open's first request):
// what each kind of program read, what the origin sent for it, and what of that was never read.
function drawReaders(readers) {
  const order = ["player", "unknown", "scanner", "background", "open"];
  const rows = Object.entries(readers)
    .filter(([, r]) => r.reads > 0 || r.receivedBytes > 0 || r.fetches > 0)
    .sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]))
    .map(([name, r]) => {
      const tr = [name, bytes(r.fromCache + r.fromOrigin), bytes(r.receivedBytes || 0), bytes(r.wastedBytes || 0),
        name === "open" ? "" : String(r.reads), name === "open" ? "" : String(r.fetches)];
      return tr;
    });
  fill("#readers", rows, "Nothing read yet.");
  for (const [i, tr] of [...$("#readers tbody").rows].entries()) if (rows[i]) tr.dataset.reader = rows[i][0];
}
// Per origin: requests a second now (against `--tpslimit`), requests and bytes since start, and
// its egress budget (`--egress-budget`): used, left, when it resets.
function drawOrigins(doc) {
  const budgets = new Map((doc.budgets || []).map(b => [b.origin, b]));
  const names = new Set([...(doc.origins || []).map(o => o.origin), ...budgets.keys()]);
  const traffic = new Map((doc.origins || []).map(o => [o.origin, o]));
  const rows = [...names].sort().map(name => {
    const o = traffic.get(name) || {requests: 0, bytes: 0, requestsPerSecond: 0}, b = budgets.get(name);
    return [name, o.requestsPerSecond.toFixed(1), String(o.requests), bytes(o.bytes),
      b ? bytes(b.usedBytes) + " of " + b.budget : "no budget", b ? bytes(b.leftBytes) : "", b ? new Date(b.resetsAt).toLocaleString() : ""];
  });
  fill("#origins", rows, "No origin asked yet.");
  for (const [i, tr] of [...$("#origins tbody").rows].entries()) if (rows[i]) tr.dataset.origin = rows[i][0];
  $("#origins-note").textContent = doc.requestRateLimit ? "(limit " + doc.requestRateLimit + " requests/s each)" : "(requests/s: the last 10 s)";
}
// A view by mountpoint: each mount (of several on one daemon) is a choice that shows the files
// under the URLs it serves (the filter, set to its first URL: a substring of the files' URLs).
// Folders show which mount serves them (`.mounts`).
let mounts = [];
function drawMounts(doors) {
  mounts = doors.filter(d => d.kind === "mount" && d.urls && d.urls.length);
  const select = $("#mount"), chosen = select.value;
  select.hidden = mounts.length < 1;
  const options = [el("option", {value: "", text: "All mounts and the proxy"})];
  for (const m of mounts) options.push(el("option", {value: m.urls[0], text: "Mount " + m.mountpoint}));
  select.replaceChildren(...options);
  select.value = mounts.some(m => m.urls[0] === filter) ? filter : chosen && chosen === filter ? chosen : "";
}
$("#mount").addEventListener("change", () => {
  const v = $("#mount").value;
  $("#filter").value = v; setFilter(v);
  for (const id of openFolders.keys()) openFolders.set(id, 0);
  refresh();
});
/// The mountpoints serving a folder (`origin` + decoded `path`): those with a URL it lies under.
function mountsOf(folder) {
  const where = folder.origin + folder.path;
  const decoded = (u) => { try { return decodeURI(u); } catch (e) { return u; } };
  return mounts.filter(m => m.urls.some(u => where.startsWith(decoded(u)) || decoded(u).startsWith(where) && folder.path !== "/")).map(m => m.mountpoint);
}
// The bandwidth limit in force (`--bwlimit`; 0: none now, a timetable's "off"), and the timetable's next change.
function bandwidthCard(b) {
  const limit = (n) => n > 0 ? bytes(n) + "/s" : "no limit";
  const next = b.nextChange ? el("div", {class: "hint", text: "then " + limit(b.nextBytesPerSecond) + " from " + new Date(b.nextChange).toLocaleString()}) : null;
  const c = card("Bandwidth limit", limit(b.bytesPerSecond), "origin bytes a second, all transfers together", next);
  c.id = "bandwidth";
  return c;
}
// One poll: the summary, then the page of each open folder.
async function refresh() {
  try {
    const doc = await getJSON(query({view: "summary", filter: filter}));
    if (!doc) throw new Error("HTTP 404");
    // A small cache (at most `openAllFiles` files, or one folder) shows its files at once: every
    // folder is open but those the reader closed (closing sticks).
    const folders = doc.folders || [];
    if (doc.cache.files <= openAllFiles || folders.length === 1)
      for (const f of folders) if (!openFolders.has(f.id) && !closed.has(f.id)) openFolders.set(f.id, 0);
    await Promise.all([...openFolders.keys()].map(loadPage));
    summary = doc;
    drawSummary(summary);
    drawFolders();
    // For the benchmark: ms from the page's start to its first full drawing.
    if (!document.body.dataset.firstDrawMs) document.body.dataset.firstDrawMs = Math.round(performance.now());
    $("#state").textContent = "updated " + new Date().toLocaleTimeString();
    $("#state").className = "meta";
  } catch (e) {
    $("#state").textContent = "not updated: " + e.message;
    $("#state").className = "meta stale";
  }
}
// The filter is kept in the page's address (`?filter=S`), so a filtered view can be bookmarked.
function setFilter(value) {
  filter = value;
  const params = new URLSearchParams(location.search);
  if (filter) params.set("filter", filter); else params.delete("filter");
  history.replaceState(null, "", location.pathname + (params.toString() ? "?" + params : "") + location.hash);
}
let typing = null;
$("#filter").addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => { setFilter($("#filter").value.trim()); for (const id of openFolders.keys()) openFolders.set(id, 0); refresh(); }, 250);
});
filter = (new URLSearchParams(location.search).get("filter") || "").trim();
$("#filter").value = filter;
// A link to `#URL` (a row's name) opens the page of its folder that holds it, its details open.
async function followHash() {
  if (location.hash.length <= 1 || location.hash === "#recent-errors") return;
  let url = location.hash.slice(1); try { url = decodeURIComponent(url); } catch (e) {}
  try {
    const doc = await getJSON(query({url: url, order: order}));
    if (!doc || !doc.page) return;
    setFilter(""); $("#filter").value = "";
    openFolders.set(doc.page.folder.id, doc.page.page); pages.set(doc.page.folder.id, doc);
    open.add(url); scrollTo = url;
    drawFolders();
  } catch (e) {}
}
window.addEventListener("hashchange", followHash);
// The next poll 3 s after the last one was drawn, never on a fixed beat: an answer slower than
// 3 s (a cache of 100k files on a busy machine) must not have polls pile up on the daemon, each
// making the others slower.
function schedule() { setTimeout(() => refresh().finally(schedule), 3000); }
refresh().then(followHash).finally(schedule);
</script>
</body>
</html>
"""#
}
