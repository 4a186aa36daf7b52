// bar ui: the live timeline, lazy diffs, colours, the terminal player, a few keys.
// Plain script of bar's own; the libraries it uses (diff2html, ansi_up, asciinema-player)
// are served from /static/vendor when `make ui-assets` installed them.
const rich = document.querySelector('meta[name="bar-rich"]')?.content === "1";
const FORMAT_KEY = "bar-diff-format";
let format = localStorage.getItem(FORMAT_KEY) || "line-by-line";
const loaded = new Map(); // .diff element -> its patch text

// --- elapsed times of running steps ---------------------------------------------------
// as pages.duration() (bar.base.clock.duration_text) says it: "0.6 s", "2 min 5 s", "1 h 3 min"
function since(iso) {
  const ms = Math.max(0, Date.now() - Date.parse(iso));
  if (ms < 100) return ms + " ms";
  const tenths = Math.floor((ms + 50) / 100);
  if (tenths < 600) return Math.floor(tenths / 10) + "." + (tenths % 10) + " s";
  const s = Math.floor((ms + 500) / 1000);
  if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
  const m = Math.floor((ms + 30000) / 60000);
  return Math.floor(m / 60) + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
}
setInterval(() => {
  for (const el of document.querySelectorAll(".elapsed[data-since]")) el.textContent = since(el.dataset.since);
}, 1000);

// --- times as a person says them: "3 min ago" (as pages.ago() does), kept true --------
function ago(iso) {
  const at = Date.parse(iso);
  const s = (Date.now() - at) / 1000;
  const day = (d, time) => {
    const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    const t = new Date(at);
    const pad = (n) => String(n).padStart(2, "0");
    const date = t.getUTCDate() + " " + months[t.getUTCMonth()] + " " + t.getUTCFullYear();
    return time ? date + " " + pad(t.getUTCHours()) + ":" + pad(t.getUTCMinutes()) + " UTC" : date;
  };
  if (Number.isNaN(s)) return null;
  if (s < -60) return day(at, true);
  if (s < 10) return "just now";
  if (s < 60) return Math.floor(s) + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  const days = Math.floor(s / 86400);
  if (days === 1) return "yesterday";
  if (days < 30) return days + " days ago";
  return day(at, false);
}
function refreshTimes() {
  for (const el of document.querySelectorAll("time[data-ago][datetime]")) {
    const said = ago(el.getAttribute("datetime"));
    if (said !== null && el.textContent !== said) el.textContent = said;
  }
}
setInterval(refreshTimes, 15000);

// --- the live timeline: server-sent events -------------------------------------------
const live = document.querySelector("table[data-live]");
if (live) {
  const source = new EventSource(live.dataset.live + "?last=" + encodeURIComponent(live.dataset.last));
  source.addEventListener("update", (event) => {
    const data = JSON.parse(event.data);
    if (data.rows) {
      const body = document.getElementById("steps");
      const holder = document.createElement("tbody");
      holder.innerHTML = data.rows;
      for (const row of [...holder.children].reverse()) {
        document.getElementById(row.id)?.remove();
        body.prepend(row);
      }
      document.querySelector("p.empty")?.remove();
    }
    live.dataset.last = data.last;
    document.getElementById("running").innerHTML = data.running;
  });
}

// --- a running step's page: its output and checkpoints as they come ------------------
// (server-sent events from …/s/STEP/live, from where the page left off; when the step
// ends, the page loads again and is its record)
const liveStep = document.querySelector("#live-step[data-live]");
if (liveStep) {
  const pre = document.getElementById("live-output");
  const spans = {};
  for (const span of pre.querySelectorAll("span[data-stream]")) spans[span.dataset.stream] = span;
  const plain = (text) => text.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "").replace(/\x1b[^[]/g, "");
  let colours = null; // an ansi_up per stream: escapes split across events are kept
  const put = (stream, text) => {
    const span = spans[stream];
    if (!span) return;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    if (colours) span.insertAdjacentHTML("beforeend", colours[stream].ansi_to_html(text));
    else span.append(document.createTextNode(plain(text)));
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  };
  const follow = () => {
    const url = liveStep.dataset.live + "?from=" + encodeURIComponent(liveStep.dataset.mark);
    const source = new EventSource(url);
    source.addEventListener("output", (event) => {
      const data = JSON.parse(event.data);
      put(data.stream, data.text);
    });
    source.addEventListener("checkpoint", (event) => {
      document.getElementById("live-checkpoints").insertAdjacentHTML("beforeend", JSON.parse(event.data).html);
      document.getElementById("live-tools").hidden = false;
    });
    source.addEventListener("cut", (event) => {
      if (!document.querySelector(".cut")) pre.insertAdjacentHTML("beforebegin", JSON.parse(event.data).html);
    });
    source.addEventListener("ended", () => {
      source.close();
      location.reload();
    });
    source.addEventListener("lost", (event) => {
      source.close();
      const note = document.querySelector(".live-note");
      note.textContent = JSON.parse(event.data).reason;
      note.classList.add("lost");
    });
  };
  if (rich) {
    import("/static/vendor/ansi_up.js").then(({ AnsiUp }) => {
      colours = {};
      for (const [name, span] of Object.entries(spans)) {
        colours[name] = new AnsiUp();
        span.innerHTML = colours[name].ansi_to_html(span.textContent);
      }
      follow();
    }, follow);
  } else {
    follow();
  }
  pre.scrollTop = pre.scrollHeight;
}

// --- diffs, loaded when shown ---------------------------------------------------------
function plainDiff(el, text) {
  const pre = document.createElement("pre");
  pre.className = "plain-diff";
  for (const line of text.split("\n")) {
    const span = document.createElement("span");
    const c = line[0];
    span.className = line.startsWith("@@") ? "hunk" : c === "+" ? "add" : c === "-" ? "del" : "";
    span.textContent = line + "\n";
    pre.append(span);
  }
  el.replaceChildren(pre);
}

function draw(el, text) {
  if (!text.trim() || !text.includes("@@")) {
    el.innerHTML = '<p class="plain">No change of content (a rename or a mode change only).</p>';
    return;
  }
  if (rich && window.Diff2HtmlUI) {
    const ui = new window.Diff2HtmlUI(el, text, {
      drawFileList: false, outputFormat: format, matching: "lines", highlight: true,
      fileContentToggle: false, stickyFileHeaders: false,
    });
    ui.draw();
  } else {
    plainDiff(el, text);
  }
}

async function load(el) {
  if (loaded.has(el) || el.dataset.loading) return;
  el.dataset.loading = "1";
  const reply = await fetch(el.dataset.src, { credentials: "same-origin" });
  const text = await reply.text();
  if (!reply.ok) {
    el.textContent = text;
    return;
  }
  loaded.set(el, text);
  draw(el, text);
  if (reply.headers.get("x-bar-cut") === "1") el.insertAdjacentHTML("beforeend", '<p class="meta">This file\'s diff is too long to show whole.</p>');
}

const seen = new IntersectionObserver((entries) => {
  for (const entry of entries) if (entry.isIntersecting) { seen.unobserve(entry.target); load(entry.target); }
}, { rootMargin: "400px" });
for (const el of document.querySelectorAll(".diff[data-src]")) seen.observe(el);
for (const d of document.querySelectorAll("details.file")) {
  d.addEventListener("toggle", () => { const el = d.querySelector(".diff[data-src]"); if (d.open && el) load(el); });
}

function setFormat(value) {
  format = value;
  localStorage.setItem(FORMAT_KEY, value);
  for (const b of document.querySelectorAll(".view-toggle button")) b.setAttribute("aria-pressed", String(b.dataset.format === value));
  for (const [el, text] of loaded) draw(el, text);
  for (const pre of document.querySelectorAll("[data-diff-drawn]")) draw(pre, pre.dataset.text);
}
for (const b of document.querySelectorAll(".view-toggle button")) b.addEventListener("click", () => setFormat(b.dataset.format));
setFormat(format);

// an apply's preview: the whole patch in one piece
for (const pre of document.querySelectorAll("pre[data-diff]")) {
  if (!rich || pre.textContent.length > 200000) continue;
  const div = document.createElement("div");
  div.dataset.diffDrawn = "1";
  div.dataset.text = pre.textContent;
  pre.replaceWith(div);
  window.addEventListener("load", () => draw(div, div.dataset.text));
}

// --- output in colour -----------------------------------------------------------------
const outputs = document.querySelectorAll("pre[data-ansi]");
if (rich && outputs.length) {
  import("/static/vendor/ansi_up.js").then(({ AnsiUp }) => {
    const up = new AnsiUp();
    for (const pre of outputs) pre.innerHTML = up.ansi_to_html(pre.textContent);
  });
}

// --- a conversation's long texts: the whole of one, put in place when asked ----------
// (without this script the link opens the whole text as a page of its own)
document.addEventListener("click", async (event) => {
  const link = event.target.closest?.("a[data-more]");
  if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  const shown = link.previousElementSibling;
  const reply = await fetch(link.href, { credentials: "same-origin" });
  if (!reply.ok || !shown) { location.href = link.href; return; }
  shown.textContent = await reply.text();
  shown.removeAttribute("data-cut");
  link.remove();
});

// --- the terminal recording -----------------------------------------------------------
window.addEventListener("load", () => {
  const cast = document.getElementById("cast");
  if (cast && window.AsciinemaPlayer) {
    cast.replaceChildren();
    window.barPlayer = window.AsciinemaPlayer.create(cast.dataset.src, cast, { fit: "width", idleTimeLimit: 2 });
  }
});

// --- keys: t timeline, c compare, a actions, d decisions, b board, / search, u unified,
// s side by side, p and n the step (or checkpoint) before and after --------------------
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || /INPUT|SELECT|TEXTAREA/.test(event.target.tagName)) return;
  if (event.key === "/") {
    const box = document.querySelector("form.find input[name=q]");
    if (box) { event.preventDefault(); box.focus(); }
    return;
  }
  const board = event.key === "b" && document.querySelector("a.board-link");
  if (board) location.href = board.href;
  const nav = [...document.querySelectorAll(".task-nav a")];
  const go = { t: 0, c: 1, a: 2, d: 3 }[event.key];
  if (go !== undefined && nav[go]) location.href = nav[go].href;
  const step = { p: "prev", n: "next" }[event.key];
  const link = step && document.querySelector(`.step-nav a[rel="${step}"]`);
  if (link) location.href = link.href;
  if (event.key === "u") setFormat("line-by-line");
  if (event.key === "s") setFormat("side-by-side");
});
