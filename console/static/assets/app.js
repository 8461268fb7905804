// @ts-check
// weft's web console. It speaks only the public protocol: JSON-RPC over
// the host's WebSocket (through rpc.js, typed by the generated
// methods.js). A session's view subscribes to its log from a cursor and
// resumes from the last seq it applied after a dropped connection or a
// host restart; events at or below that seq are dropped, so nothing is
// shown twice.
import { Client, RPCError, login, sessionState } from "./rpc.js";

const TAIL = 200; // events replayed when a session opens; older ones page in on scroll
const PAGE = 300; // events per older page
const TRUNC = 2000; // characters of tool output shown before "Show all"
const FRAME_BUDGET_MS = 6; // time a frame spends applying events
const MAXDOM = 600; // transcript items kept live on the page; older ones page back in on scroll

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
/**
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node|string|null|undefined)} kids
 */
function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids) if (k != null) el.append(k);
  return el;
}
const uuid = () => (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2) + Date.now());

/** @type {Client} */
let client;
const state = {
  /** @type {any[]} */ sessions: [],
  /** @type {Map<string, number>} */ waiting: new Map(),
  /** @type {Set<string>} */ notified: new Set(),
  connected: false,
  flushMs: 0, // time spent applying events, for the browser tests' figures
};

/**
 * The open session: its cursor and what is on the page.
 * @type {null|{id:string, lastSeq:number, firstSeq:number, subId:string, activeRun:string, status:string,
 *   deleted:boolean, queue:any[], els:Map<string, HTMLElement>, usage:Map<string, {in:number,out:number}>,
 *   follows:Map<string, {pre:HTMLElement, dec:TextDecoder}>, loadingOlder:boolean, applied:number, painted:boolean}}
 */
let view = null;

// ---- banner and errors

let bannerTimer = 0;
/** @param {string} text @param {"info"|"error"|"down"} [kind] @param {number} [ms] */
function banner(text, kind = "info", ms = 0) {
  const b = $("banner");
  clearTimeout(bannerTimer);
  if (!text) { b.hidden = true; return; }
  b.textContent = text;
  b.className = kind;
  b.hidden = false;
  if (ms) bannerTimer = window.setTimeout(() => (b.hidden = true), ms);
}
/** @param {any} e */
function showError(e) {
  if (e instanceof RPCError && e.kind === "not_found" && view) {
    // The session is gone: say so once, and let no later call's
    // not_found replace that.
    if (!view.deleted) markDeleted();
    return;
  }
  banner(e instanceof RPCError ? `${e.kind}: ${e.message}` : String(e && e.message || e), "error", 6000);
}

// ---- login

/** @param {RPCError} err */
function showLogin(err) {
  $("app").hidden = true;
  $("login").hidden = false;
  const reason = err.data && err.data.reason;
  const msg = {
    expired: "Your console login has expired. Run `weft console` on the host's machine for a new link.",
    revoked: "The host's token has changed since you logged in, so your login was revoked. Run `weft console` for a new link.",
    spent: "This login link was already used. Run `weft console` for a new one.",
    malformed: "This login link is not valid. Run `weft console` for a new one.",
  }[reason] || `Not logged in: ${err.message}`;
  $("login-msg").textContent = msg;
  $("login").dataset.reason = reason || "missing";
  if (client) client.closed = true;
}

async function boot() {
  const m = location.hash.match(/code=([^&]+)/);
  let code = m ? decodeURIComponent(m[1]) : "";
  if (code) history.replaceState(null, "", location.pathname + location.search);
  for (let delay = 500; ; delay = Math.min(delay * 2, 4000)) {
    try {
      if (code) {
        const err = await login(code);
        code = "";
        if (err) return showLogin(err);
      }
      const st = await sessionState();
      if (st.error) return showLogin(st.error);
      if (!st.down) break;
    } catch { /* the host is down: retry below */ }
    banner("The host is not answering. Retrying…", "down");
    await new Promise((r) => setTimeout(r, delay));
  }
  banner("");
  $("login").hidden = true;
  $("app").hidden = false;
  start();
}

// ---- connection

function start() {
  client = new Client({
    onState(s, info) {
      state.connected = s === "open";
      document.body.dataset.conn = s;
      if (s === "down") banner(`Reconnecting… (${info || "connection lost"})`, "down");
      else if (s === "open") banner("");
    },
    onAuth: (e) => e && showLogin(e),
    onNotify,
    async onOpen() {
      refreshSessions();
      if (view) await subscribe(view);
    },
  });
  client.connect();
  setInterval(() => state.connected && refreshSessions(), 2000);
  const sid = new URLSearchParams(location.hash.slice(1)).get("s");
  if (sid) openSession(sid);
}

/** @param {string} method @param {any} p */
function onNotify(method, p) {
  if (method === "events/event") {
    if (view && p.event.sessionId === view.id) {
      view.queue.push(p.event);
      schedule();
    }
  } else if (method === "events/closed") {
    if (view && p.subscriptionId === view.subId && !view.deleted) {
      if (p.reason === "deleted" || p.reason === "not_found") markDeleted();
      else subscribe(view).catch(showError);
    }
  } else if (method === "process/output") {
    const f = view && view.follows.get(p.subscriptionId);
    if (f) {
      const bytes = new Uint8Array(p.chunk.data || []);
      f.pre.append(f.dec.decode(bytes, { stream: true }));
      if (f.pre.textContent && f.pre.textContent.length > 200000) f.pre.textContent = f.pre.textContent.slice(-100000);
      f.pre.scrollTop = f.pre.scrollHeight;
    }
  } else if (method === "process/closed") {
    const f = view && view.follows.get(p.subscriptionId);
    if (f) f.pre.append(`\n[${p.reason}]`);
  }
}

// ---- sessions list

async function refreshSessions() {
  try {
    const [list, reqs] = await Promise.all([
      client.call("session/list", { limit: 200 }),
      client.call("request/list", { limit: 500 }),
    ]);
    state.sessions = list.sessions || [];
    const waiting = new Map();
    for (const r of reqs.requests || []) {
      waiting.set(r.sessionId, (waiting.get(r.sessionId) || 0) + 1);
      if (!state.notified.has(r.id)) {
        state.notified.add(r.id);
        notify(r);
      }
    }
    state.waiting = waiting;
    renderSessions();
  } catch (e) {
    if (state.connected) showError(e);
  }
}

/** @param {any} r an open request */
function notify(r) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  if (!document.hidden && view && view.id === r.sessionId) return;
  const what = r.kind === "approval" ? `approve ${r.toolCall ? r.toolCall.name : "a tool call"}` : "answer a question";
  const n = new Notification("weft: waiting for you", { body: `Session ${r.sessionId}: ${what}`, tag: r.id });
  n.onclick = () => { window.focus(); openSession(r.sessionId); };
}

function renderSessions() {
  const q = /** @type {HTMLInputElement} */ ($("search")).value.trim().toLowerCase();
  const ul = $("sessions");
  const items = [];
  let total = 0;
  for (const s of state.sessions) {
    const hay = `${s.title || ""} ${s.id} ${s.model || ""}`.toLowerCase();
    if (q && !hay.includes(q)) continue;
    const n = state.waiting.get(s.id) || 0;
    total += n;
    items.push(h("li", { class: view && view.id === s.id ? "cur" : "" },
      h("button", { type: "button", class: "sess", "data-id": s.id, onclick: () => openSession(s.id) },
        h("span", { class: "t", text: s.title || s.id }),
        n ? h("span", { class: "badge", "aria-label": `${n} waiting for approval`, text: `${n} waiting` }) : null,
        h("span", { class: "m muted", text: `${s.model || "default model"} · ${s.activeRunId ? "running" : "idle"} · ${ago(s.updatedAt)}` }))));
  }
  ul.replaceChildren(...items);
  if (!items.length) ul.append(h("li", { class: "muted", text: q ? "No session matches." : "No sessions yet." }));
  document.title = total ? `(${total}) weft console` : "weft console";
}

/** @param {string} t */
function ago(t) {
  const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
  if (!isFinite(s)) return "";
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}

async function createSession(/** @type {SubmitEvent} */ ev) {
  ev.preventDefault();
  const f = /** @type {HTMLFormElement} */ (ev.target);
  const fd = new FormData(f);
  /** @type {Record<string, any>} */
  const p = { idempotencyKey: uuid() };
  const title = String(fd.get("title") || "").trim();
  const model = String(fd.get("model") || "").trim();
  if (title) p.title = title;
  if (model) p.model = model;
  const mounts = String(fd.get("mounts") || "").split("\n").map((l) => l.trim()).filter(Boolean);
  if (mounts.length) {
    p.mounts = mounts.map((l, i) => {
      const ro = l.endsWith(":ro");
      const path = ro ? l.slice(0, -3) : l;
      return { id: path.split("/").filter(Boolean).pop() || `m${i}`, path, mode: ro ? "ro" : "rw", default: i === 0 };
    });
  }
  try {
    const s = await client.call("session/create", p);
    f.reset();
    /** @type {HTMLDetailsElement} */ ($("new")).open = false;
    await refreshSessions();
    openSession(s.id);
  } catch (e) { showError(e); }
}

// ---- session view

/** @param {string} id */
async function openSession(id) {
  if (view && view.subId) client.call("events/unsubscribe", { subscriptionId: view.subId }).catch(() => {});
  view = { id, lastSeq: 0, firstSeq: 1, subId: "", activeRun: "", status: "", deleted: false, queue: [],
    els: new Map(), usage: new Map(), follows: new Map(), loadingOlder: false, applied: 0, painted: false };
  const v = view;
  history.replaceState(null, "", "#s=" + encodeURIComponent(id));
  document.body.classList.add("in-view");
  $("empty").hidden = true;
  $("view").hidden = false;
  $("events").replaceChildren();
  $("title").textContent = id;
  setStatus("");
  $("composer").classList.remove("off");
  renderSessions();
  try {
    const s = await client.call("session/get", { sessionId: id });
    if (view !== v) return;
    $("title").textContent = s.title || s.id;
    v.lastSeq = Math.max(0, (s.lastSeq || 0) - TAIL);
    v.firstSeq = v.lastSeq + 1;
    $("older").hidden = v.firstSeq <= 1;
    await subscribe(v);
    refreshPanels();
  } catch (e) { showError(e); }
  /** @type {HTMLTextAreaElement} */ ($("input")).focus();
}

/** Subscribes (again) from the view's cursor. @param {NonNullable<typeof view>} v */
async function subscribe(v) {
  if (v.deleted) return;
  const r = await client.call("events/subscribe", { sessionId: v.id, after: v.lastSeq });
  if (view === v) v.subId = r.subscriptionId;
}

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  // A hidden tab gets no animation frames: keep its cursor moving anyway.
  if (document.hidden) setTimeout(flush, 100);
  else requestAnimationFrame(flush);
}

// flush applies the queued events once a frame, in one batch, so that a
// fast stream costs one layout per frame.
function flush() {
  const t0 = performance.now();
  try { flushNow(); } finally { state.flushMs += performance.now() - t0; }
}

function flushNow() {
  scheduled = false;
  const v = view;
  if (!v) return;
  const log = $("log");
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  const q = v.queue;
  const ol = $("events");
  const frag = document.createDocumentFragment();
  // A frame's budget: what is left waits for the next frame, so a burst
  // of events never stalls the page (it catches up as the burst ends).
  const until = performance.now() + FRAME_BUDGET_MS;
  let i = 0;
  for (; i < q.length; i++) {
    const e = q[i];
    if (e.seq <= v.lastSeq) continue; // replayed after a reconnect: already shown
    v.lastSeq = e.seq;
    v.applied++;
    apply(v, e, frag, true);
    if ((i & 15) === 15 && performance.now() > until) { i++; break; }
  }
  v.queue = q.slice(i);
  if (v.queue.length) schedule();
  ol.append(frag);
  if (atBottom && ol.childElementCount > MAXDOM) trim(v, ol);
  if (atBottom) log.scrollTop = log.scrollHeight;
  if (!v.painted && v.applied) {
    v.painted = true;
    requestAnimationFrame(() => performance.mark("weft:first-events"));
  }
}

/**
 * Drops the oldest items while the reader is at the bottom, so a long
 * live stream keeps the page's layout (and memory) bounded; they page
 * back in on scroll.
 * @param {NonNullable<typeof view>} v
 * @param {HTMLElement} ol
 */
function trim(v, ol) {
  const drop = ol.childElementCount - Math.floor(MAXDOM * 0.75);
  for (let i = 0; i < drop && ol.firstElementChild; i++) ol.firstElementChild.remove();
  const first = /** @type {HTMLElement|null} */ (ol.firstElementChild);
  if (first && first.dataset.seq) v.firstSeq = +first.dataset.seq;
  for (const [k, el] of v.els) if (!el.isConnected) v.els.delete(k);
  $("older").hidden = v.firstSeq <= 1;
}

/**
 * Renders one event into frag (new elements) or into elements already on
 * the page (deltas, results, answers).
 * @param {NonNullable<typeof view>} v
 * @param {any} e
 * @param {DocumentFragment} frag
 * @param {boolean} live false while paging older events in
 */
function apply(v, e, frag, live) {
  const d = e.data || {};
  const run = e.runId || "";
  const line = (/** @type {string} */ cls, /** @type {(Node|string)[]} */ ...kids) => {
    const li = h("li", { class: cls, "data-seq": e.seq }, ...kids);
    frag.append(li);
    return li;
  };
  /** @param {string} key @param {()=>HTMLElement} make */
  const get = (key, make) => {
    let el = v.els.get(key);
    if (!el) { el = make(); v.els.set(key, el); }
    return el;
  };
  const assistant = () => get(`a:${run}:${d.step}`, () => line("assistant",
    h("details", { class: "reasoning", hidden: true }, h("summary", { text: "Reasoning" }), h("div", { class: "r" })),
    h("div", { class: "text" })));
  switch (e.type) {
    case "session.created":
      line("meta", `Session created${d.model ? ` (model ${d.model})` : ""}`);
      break;
    case "session.updated":
      if (d.title) $("title").textContent = d.title;
      break;
    case "session.deleted":
      if (live) markDeleted();
      break;
    case "message.user":
      line("user", h("div", { class: "text", text: inputText(d.content) }));
      break;
    case "run.queued":
      if (live && !v.activeRun) setStatus("queued", run);
      break;
    case "run.started":
    case "run.resumed":
      if (live) setStatus("running", run);
      break;
    case "reasoning.delta": {
      const a = assistant();
      const r = /** @type {HTMLDetailsElement} */ (a.querySelector(".reasoning"));
      r.hidden = false;
      appendText(/** @type {HTMLElement} */ (r.querySelector(".r")), d.text);
      break;
    }
    case "message.delta":
      appendText(/** @type {HTMLElement} */ (assistant().querySelector(".text")), d.text);
      break;
    case "message.completed": {
      const a = assistant();
      const t = a.querySelector(".text");
      if (t && d.text != null) t.textContent = d.text;
      if (d.reasoning) {
        const r = /** @type {HTMLDetailsElement} */ (a.querySelector(".reasoning"));
        r.hidden = false;
        const rr = r.querySelector(".r");
        if (rr) rr.textContent = d.reasoning;
      }
      a.classList.add("done");
      break;
    }
    case "tool.call.started": {
      // The pretty arguments are built when the call is opened: a fast
      // stream of calls costs one summary line each.
      const det = h("details", { class: "tool" },
        h("summary", {}, h("span", { class: "tn", text: d.name }), " ", h("code", { class: "ta", text: short(d.arguments, 80) }),
          h("span", { class: "ts muted", text: " running…" })),
        h("div", { class: "out" }));
      det.addEventListener("toggle", () => {
        if (det.open && !det.querySelector(".args")) det.querySelector("summary")?.after(h("pre", { class: "args", text: pretty(d.arguments) }));
      });
      v.els.set(`t:${d.id}`, line("toolcall", det));
      break;
    }
    case "tool.call.completed": {
      const li = get(`t:${d.id}`, () => line("toolcall", h("details", { class: "tool" },
        h("summary", {}, h("span", { class: "tn", text: d.name }), h("span", { class: "ts muted" })), h("div", { class: "out" }))));
      const ts = li.querySelector(".ts");
      if (ts) ts.textContent = d.isError ? " failed" : ` done${d.durationMs != null ? ` in ${d.durationMs} ms` : ""}`;
      li.classList.toggle("err", !!d.isError);
      li.classList.add("finished");
      const out = li.querySelector(".out");
      if (out) out.replaceChildren(outputBlock(typeof d.output === "string" ? d.output : JSON.stringify(d.output, null, 2)));
      break;
    }
    case "approval.requested":
      v.els.set(`q:${d.approvalId}`, line("request approval", approvalCard(v, d)));
      if (live) setStatus("waiting", run);
      break;
    case "approval.resolved":
    case "approval.expired": {
      const li = v.els.get(`q:${d.approvalId}`);
      if (li) resolveCard(li, `${e.type === "approval.expired" ? "Expired: " : ""}${decisionText(d.decision)}`, d.by, d.message);
      if (live && v.status === "waiting") setStatus("running", run);
      break;
    }
    case "input.requested":
      v.els.set(`q:${d.requestId}`, line("request question", questionCard(v, d)));
      if (live) setStatus("waiting", run);
      break;
    case "input.resolved": {
      const li = v.els.get(`q:${d.requestId}`);
      if (li) resolveCard(li, d.status === "answered" ? `Answered: ${d.text || (d.choice != null ? `choice ${d.choice + 1}` : "")}` : d.status, d.by);
      if (live && v.status === "waiting") setStatus("running", run);
      break;
    }
    case "steer.accepted":
      v.els.set(`s:${d.steerId}`, line("user steer", h("span", { class: "muted", text: "steer " }), h("span", { class: "text", text: inputText(d.input) }),
        h("span", { class: "ss muted", text: " (pending)" })));
      break;
    case "steer.consumed":
    case "steer.dropped": {
      const li = v.els.get(`s:${d.steerId}`);
      const ss = li && li.querySelector(".ss");
      if (ss) ss.textContent = e.type === "steer.consumed" ? " (seen by the model)" : ` (dropped: ${d.reason || ""})`;
      break;
    }
    case "usage": {
      const u = v.usage.get(run) || { in: 0, out: 0 };
      u.in += d.usage.inputTokens || 0;
      u.out += d.usage.outputTokens || 0;
      v.usage.set(run, u);
      break;
    }
    case "run.completed":
    case "run.failed":
    case "run.cancelled":
    case "run.interrupted": {
      const st = e.type.slice(4);
      const u = d.usage ? `${d.usage.inputTokens} in / ${d.usage.outputTokens} out tokens` : "";
      line(`runend ${st}`, h("span", { class: "status " + st, text: st }),
        ` ${d.steps != null ? `${d.steps} step${d.steps === 1 ? "" : "s"}` : ""}${u ? ` · ${u}` : ""}`,
        d.error ? h("span", { class: "errtext", text: ` · ${d.error.kind}: ${d.error.message}` }) : "",
        d.reason ? ` · ${d.reason}` : "");
      if (live && (!v.activeRun || v.activeRun === run)) setStatus(st, "");
      break;
    }
    case "context.compacted":
      line("meta compacted", `Context compacted${d.reason && d.reason !== "threshold" ? ` (${d.reason})` : ""}: ${tokens(d.tokensBefore)} → ${tokens(d.tokensAfter)} tokens`);
      break;
    case "session.forked":
      line("meta forked", `Forked from session ${d.from} at event ${d.seq}`);
      break;
    case "session.rewound":
      line("meta rewound", `Rewound to event ${d.toSeq}${d.files ? " (files put back too)" : ""}`);
      break;
    case "checkpoint.recorded": {
      const n = (d.changes || []).length;
      if (n) line("meta checkpoint", `Checkpoint: ${n} change${n === 1 ? "" : "s"} in ${d.mountId}${d.incomplete ? ` (incomplete: ${d.incomplete})` : ""}`);
      break;
    }
    case "tool.progress": {
      const li = v.els.get(`t:${d.id}`);
      const ts = li && li.querySelector(".ts");
      if (ts && !li.classList.contains("finished")) {
        const pct = d.total ? ` ${Math.floor((100 * d.progress) / d.total)}%` : ` ${d.progress}`;
        ts.textContent = ` running…${pct}${d.message ? ` — ${short(d.message, 80)}` : ""}`;
      }
      break;
    }
    case "mcp.server_failed":
      line("meta error", h("span", { class: "errtext", text: `MCP server ${d.server} failed: ${short(d.error, 500)}` }),
        d.tools && d.tools.length ? ` (its ${d.tools.length} tools answer with this error until it is back)` : "");
      break;
    case "model.retry":
      line("meta", `Model call failed; retry ${d.attempt} in ${d.delayMs} ms${d.error ? `: ${d.error.message || ""}` : ""}`);
      break;
    case "process.started":
    case "process.exited":
      line("meta", `Process ${d.processId} ${e.type === "process.started" ? "started" : d.status}: ${d.command || d.tool || ""}`);
      if (live) refreshProcs();
      break;
    case "mount.added":
    case "mount.removed":
      line("meta", `${e.type === "mount.added" ? "Mounted" : "Unmounted"} ${d.mount && d.mount.id}`);
      if (live) refreshMounts();
      break;
    default:
      break;
  }
}

/**
 * Appends streamed text to el's one text node, so a long stream is one
 * node to lay out, not one per delta.
 * @param {HTMLElement|null} el
 * @param {string} text
 */
function appendText(el, text) {
  if (!el || !text) return;
  const last = el.lastChild;
  if (last && last.nodeType === Node.TEXT_NODE) /** @type {Text} */ (last).appendData(text);
  else el.append(text);
}

/** @param {number} n a token count, as "12.3k" */
function tokens(n) { n = +n || 0; return n >= 10000 ? `${(n / 1000).toFixed(1)}k` : String(n); }

/** @param {any} input */
function inputText(input) {
  if (typeof input === "string") return input;
  if (Array.isArray(input)) return input.map((p) => p.text || `[${p.type}]`).join("");
  return "";
}
/** @param {string} s @param {number} n */
function short(s, n) { s = String(s || ""); return s.length > n ? s.slice(0, n) + "…" : s; }
/** @param {string} s */
function pretty(s) { try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return String(s || ""); } }

/** Long output truncated, with a "Show all" button. @param {string} text */
function outputBlock(text) {
  const pre = h("pre", { class: "output", text: text.length > TRUNC ? text.slice(0, TRUNC) : text });
  if (text.length <= TRUNC) return pre;
  const btn = h("button", { type: "button", class: "showall", text: `Show all (${text.length} characters)` });
  btn.addEventListener("click", () => { pre.textContent = text; btn.remove(); });
  return h("div", {}, pre, btn);
}

/** @param {string} d */
function decisionText(d) {
  return { allow_once: "Allowed once", allow_session: "Always allowed", deny: "Denied", cancelled: "Cancelled" }[d] || d;
}

/**
 * @param {HTMLElement} li
 * @param {string} what
 * @param {any} by
 * @param {string} [msg]
 */
function resolveCard(li, what, by, msg) {
  li.classList.add("resolved");
  const who = by ? (by.client || by.policy || by.transport || "") : "";
  const r = li.querySelector(".resolution");
  if (r) r.textContent = `${what}${who ? ` by ${who}` : ""}${by && by.transport && by.client ? ` (${by.transport})` : ""}${msg ? ` — “${msg}”` : ""}`;
  li.querySelectorAll("button, input").forEach((b) => /** @type {HTMLButtonElement} */ (b).disabled = true);
}

/** @param {NonNullable<typeof view>} v @param {any} d */
function approvalCard(v, d) {
  const tc = d.toolCall || {};
  const msg = h("input", { type: "text", class: "msg", placeholder: "Message for the model (optional)", "aria-label": "Message for the model" });
  const decide = (/** @type {string} */ decision) => async () => {
    /** @type {Record<string, any>} */
    const p = { approvalId: d.approvalId, decision, sessionId: v.id, idempotencyKey: uuid() };
    const m = /** @type {HTMLInputElement} */ (msg).value.trim();
    if (m) p.message = m;
    try { await client.call("approval/decide", p); } catch (e) {
      if (e instanceof RPCError && e.kind === "already_resolved") {
        banner("Already answered elsewhere.", "info", 4000);
      } else showError(e);
    }
  };
  const opts = d.options && d.options.length ? d.options : ["allow_once", "allow_session", "deny"];
  return h("div", { class: "card", "data-id": d.approvalId },
    h("div", {}, h("strong", { text: "Approve " }), h("code", { text: tc.name || "" }), h("span", { class: "muted", text: d.rule && d.rule.reason ? ` — ${d.rule.reason}` : "" })),
    h("pre", { class: "args", text: pretty(tc.arguments) }),
    msg,
    h("div", { class: "row" }, ...opts.map((/** @type {string} */ o) => h("button", { type: "button", class: o === "deny" ? "danger" : o === "allow_once" ? "primary" : "", "data-decision": o,
      onclick: decide(o), text: { allow_once: "Allow", allow_session: "Always", deny: "Deny" }[o] || o }))),
    h("div", { class: "resolution", role: "status" }));
}

/** @param {NonNullable<typeof view>} v @param {any} d */
function questionCard(v, d) {
  const answer = (/** @type {Record<string, any>} */ extra) => async () => {
    try { await client.call("input/answer", { requestId: d.requestId, sessionId: v.id, idempotencyKey: uuid(), ...extra }); }
    catch (e) { showError(e); }
  };
  const text = /** @type {HTMLInputElement} */ (h("input", { type: "text", class: "msg", "aria-label": "Your answer" }));
  return h("div", { class: "card", "data-id": d.requestId },
    h("div", {}, h("strong", { text: "Question: " }), d.question),
    d.choices && d.choices.length
      ? h("div", { class: "row" }, ...d.choices.map((/** @type {string} */ c, /** @type {number} */ i) => h("button", { type: "button", text: c, onclick: answer({ choice: i }) })))
      : h("div", { class: "row" }, text, h("button", { type: "button", class: "primary", text: "Answer", onclick: () => answer({ text: text.value })() })),
    h("div", { class: "resolution", role: "status" }));
}

/** @param {string} st @param {string} [run] */
function setStatus(st, run) {
  if (!view) return;
  view.status = st;
  if (run !== undefined) view.activeRun = st === "" || ["completed", "failed", "cancelled", "interrupted"].includes(st) ? "" : run;
  const el = $("status");
  el.textContent = st || "idle";
  el.className = "status " + (st || "idle");
  /** @type {HTMLButtonElement} */ ($("cancel")).disabled = !view.activeRun || view.deleted;
}

function markDeleted() {
  if (!view) return;
  view.deleted = true;
  view.subId = "";
  banner("This session was deleted.", "error");
  $("composer").classList.add("off");
  $("events").append(h("li", { class: "meta deleted", text: "This session was deleted." }));
  setStatus("deleted", "");
  refreshSessions();
}

async function loadOlder() {
  const v = view;
  if (!v || v.loadingOlder || v.firstSeq <= 1) return;
  v.loadingOlder = true;
  try {
    const after = Math.max(0, v.firstSeq - 1 - PAGE);
    const r = await client.call("events/read", { sessionId: v.id, after, limit: v.firstSeq - 1 - after });
    if (view !== v) return;
    const frag = document.createDocumentFragment();
    // Older events render apart: their deltas must not land in newer items.
    const live = v.els;
    v.els = new Map();
    try {
      for (const e of r.events || []) if (e.seq < v.firstSeq) { v.applied++; apply(v, e, frag, false); }
    } finally { v.els = live; }
    const log = $("log");
    const before = log.scrollHeight;
    $("events").prepend(frag);
    log.scrollTop += log.scrollHeight - before;
    v.firstSeq = after + 1;
    $("older").hidden = v.firstSeq <= 1;
  } catch (e) { showError(e); }
  finally { v.loadingOlder = false; }
}

// ---- composer

async function send() {
  const v = view;
  const ta = /** @type {HTMLTextAreaElement} */ ($("input"));
  const text = ta.value.trim();
  if (!v || !text || v.deleted) return;
  const busy = /** @type {HTMLSelectElement} */ ($("busy")).value;
  ta.value = "";
  try {
    // A person is watching: writes and shells wait for them, as in the
    // terminal UI (a session's or the config's policy still comes first).
    await client.call("run/start", { sessionId: v.id, input: text, busy, defaultPreset: "ask-writes", idempotencyKey: uuid() });
  } catch (e) {
    if (!ta.value) ta.value = text; // nothing lost
    showError(e);
  }
}

async function cancelRun() {
  if (!view || !view.activeRun) return;
  try { await client.call("run/cancel", { runId: view.activeRun, reason: "cancelled from the console" }); } catch (e) { showError(e); }
}

// ---- processes and mounts

function refreshPanels() { refreshProcs(); refreshMounts(); }

async function refreshProcs() {
  const v = view;
  if (!v) return;
  try {
    const r = await client.call("process/list", { sessionId: v.id });
    if (view !== v) return;
    const ps = r.processes || [];
    $("procs-count").textContent = ps.length ? `(${ps.filter((/** @type {any} */ p) => p.status === "running").length} running)` : "";
    $("procs").replaceChildren(...ps.map((/** @type {any} */ p) => {
      const pre = h("pre", { class: "output live", hidden: true });
      const running = p.status === "running";
      return h("li", {},
        h("div", { class: "row" }, h("code", { text: p.spec.command || p.spec.tool || p.kind }), h("span", { class: "muted", text: ` ${p.id} · ${p.status}` }),
          h("button", { type: "button", text: "Output", onclick: () => follow(v, p, pre) }),
          running ? h("button", { type: "button", text: "Interrupt", onclick: () => call("process/signal", { id: p.id, sessionId: v.id, name: "interrupt", idempotencyKey: uuid() }) }) : null,
          running ? h("button", { type: "button", class: "danger", text: "Cancel", onclick: () => call("process/cancel", { id: p.id, sessionId: v.id, idempotencyKey: uuid() }) }) : null),
        pre);
    }));
  } catch (e) { showError(e); }
}

/** @param {NonNullable<typeof view>} v @param {any} p @param {HTMLElement} pre */
async function follow(v, p, pre) {
  if (!pre.hidden) { pre.hidden = true; return; }
  pre.hidden = false;
  pre.textContent = "";
  try {
    const r = await client.call("process/follow", { id: p.id, sessionId: v.id, offset: 0 });
    v.follows.set(r.subscriptionId, { pre, dec: new TextDecoder() });
  } catch (e) { showError(e); }
}

/** @param {string} m @param {Record<string, any>} p */
async function call(m, p) {
  try { await client.call(m, p); refreshProcs(); } catch (e) { showError(e); }
}

async function refreshMounts() {
  const v = view;
  if (!v) return;
  try {
    const r = await client.call("env/list", { sessionId: v.id });
    if (view !== v) return;
    $("mounts").replaceChildren(...(r.mounts || []).map((/** @type {any} */ m) => h("li", { class: "row" },
      h("code", { text: `/environment/${m.id}` }), h("span", { class: "muted", text: ` ${m.path || ""} (${m.mode})${m.id === r.defaultMountId ? " default" : ""}` }),
      h("button", { type: "button", text: "Unmount", onclick: async () => {
        try { await client.call("env/unmount", { sessionId: v.id, mountId: m.id, idempotencyKey: uuid() }); refreshMounts(); } catch (e) { showError(e); }
      } }))));
  } catch (e) { showError(e); }
}

async function mount(/** @type {SubmitEvent} */ ev) {
  ev.preventDefault();
  if (!view) return;
  const f = /** @type {HTMLFormElement} */ (ev.target);
  const fd = new FormData(f);
  try {
    await client.call("env/mount", { sessionId: view.id, idempotencyKey: uuid(),
      mount: { id: String(fd.get("id")), path: String(fd.get("path")), mode: String(fd.get("mode")) } });
    f.reset();
    refreshMounts();
  } catch (e) { showError(e); }
}

let deleteArmed = 0;
async function deleteSession() {
  const btn = /** @type {HTMLButtonElement} */ ($("delete"));
  if (!view) return;
  if (!deleteArmed) {
    btn.textContent = "Really delete?";
    deleteArmed = window.setTimeout(() => { deleteArmed = 0; btn.textContent = "Delete"; }, 4000);
    return;
  }
  clearTimeout(deleteArmed);
  deleteArmed = 0;
  btn.textContent = "Delete";
  try {
    await client.call("session/delete", { sessionId: view.id, idempotencyKey: uuid() });
  } catch (e) { showError(e); }
}

// ---- wiring

$("search").addEventListener("input", renderSessions);
$("new-form").addEventListener("submit", createSession);
$("mount-form").addEventListener("submit", mount);
$("composer").addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
$("cancel").addEventListener("click", cancelRun);
$("delete").addEventListener("click", deleteSession);
$("older-btn").addEventListener("click", loadOlder);
$("log").addEventListener("scroll", () => { if ($("log").scrollTop < 40) loadOlder(); });
$("back").addEventListener("click", () => document.body.classList.remove("in-view"));
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send(); }
});
document.addEventListener("keydown", (ev) => {
  const t = /** @type {HTMLElement} */ (ev.target);
  const typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT");
  if (ev.key === "Escape" && view && view.activeRun) { ev.preventDefault(); cancelRun(); }
  else if (ev.key === "/" && !typing) { ev.preventDefault(); document.body.classList.remove("in-view"); $("search").focus(); }
});
if ("Notification" in window && Notification.permission === "default") {
  const b = $("notify");
  b.hidden = false;
  b.addEventListener("click", async () => { await Notification.requestPermission(); b.hidden = true; });
}

// A new login link opened in this tab changes only the fragment: log in with it.
window.addEventListener("hashchange", () => { if (/code=/.test(location.hash)) location.reload(); });

// For the browser tests and the curious: what the page has applied.
Object.defineProperty(window, "weftConsole", { value: Object.freeze({
  get lastSeq() { return view ? view.lastSeq : 0; },
  get firstSeq() { return view ? view.firstSeq : 0; },
  get sessionId() { return view ? view.id : ""; },
  get connected() { return state.connected; },
  get applied() { return view ? view.applied : 0; },
  get flushMs() { return state.flushMs; },
}) });

boot();
