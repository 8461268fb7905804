// @ts-check
// A JSON-RPC 2.0 client over the host's WebSocket (/rpc/ws), typed by the
// generated method list: a method or a param that the method table does
// not have is refused here, before it is sent. It reconnects by itself
// (with backoff) and tells its owner, who resumes its subscriptions from
// their cursors.
import { methods } from "./methods.js";

/** An error answered by the host: code, kind and data as on the wire. */
export class RPCError extends Error {
  /** @param {{code:number, message:string, data?:any}} e */
  constructor(e) {
    super(e.message);
    this.code = e.code;
    this.data = e.data || {};
    this.kind = this.data.kind || "";
  }
}

/**
 * Checks params against the generated table.
 * @param {string} method
 * @param {Record<string, any>} params
 */
export function checkParams(method, params) {
  const m = methods[/** @type {keyof typeof methods} */ (method)];
  if (!m) throw new Error(`unknown method ${method}`);
  for (const k of Object.keys(params)) {
    if (!(k in m)) throw new Error(`${method}: unknown param ${k}`);
  }
  for (const [k, t] of Object.entries(m)) {
    if (!String(t).endsWith("?") && !(k in params)) throw new Error(`${method}: missing param ${k}`);
  }
}

export class Client {
  /**
   * @param {{onState:(s:"connecting"|"open"|"down", info?:string)=>void, onNotify:(method:string, params:any)=>void, onOpen:()=>Promise<void>, onAuth:(e:RPCError|null)=>void}} h
   */
  constructor(h) {
    this.h = h;
    /** @type {WebSocket|null} */
    this.ws = null;
    this.next = 1;
    /** @type {Map<number, {resolve:(v:any)=>void, reject:(e:any)=>void}>} */
    this.pending = new Map();
    this.delay = 250;
    this.closed = false;
    /** @type {Promise<void>} */
    this.ready = new Promise((r) => (this.readyResolve = r));
  }

  connect() {
    if (this.closed) return;
    this.h.onState("connecting");
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/rpc/ws";
    const ws = new WebSocket(url);
    this.ws = ws;
    let opened = false;
    ws.onopen = async () => {
      opened = true;
      try {
        await this.send("initialize", { clientInfo: { name: "weft console", version: "1" }, protocolVersion: "2026-01-01" }, true);
        this.delay = 250;
        this.h.onState("open");
        this.readyResolve && this.readyResolve();
        await this.h.onOpen();
      } catch (e) {
        this.h.onState("down", String(e && e.message));
      }
    };
    ws.onmessage = (ev) => this.receive(String(ev.data));
    ws.onclose = async () => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const p of this.pending.values()) p.reject(new Error("connection lost"));
      this.pending.clear();
      this.ready = new Promise((r) => (this.readyResolve = r));
      if (this.closed) return;
      if (!opened) {
        // A refused upgrade looks like any other failure: ask why.
        const why = await sessionState();
        if (why.error) { this.h.onAuth(why.error); return; }
      }
      this.h.onState("down", opened ? "connection lost" : "host unreachable");
      setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 4000);
    };
  }

  /** @param {string} text */
  receive(text) {
    let msgs;
    try { msgs = JSON.parse(text); } catch { return; }
    for (const m of Array.isArray(msgs) ? msgs : [msgs]) {
      if (m.id != null && this.pending.has(m.id)) {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        if (m.error) p?.reject(new RPCError(m.error));
        else p?.resolve(m.result);
      } else if (m.method) {
        this.h.onNotify(m.method, m.params);
      }
    }
  }

  /**
   * Calls a method once connected.
   * @param {string} method
   * @param {Record<string, any>} params
   * @returns {Promise<any>}
   */
  async call(method, params) {
    checkParams(method, params);
    await this.ready;
    return this.send(method, params, false);
  }

  /**
   * @param {string} method
   * @param {Record<string, any>} params
   * @param {boolean} now
   */
  send(method, params, now) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error("not connected"));
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      void now;
    });
  }
}

/** @type {string} */
let csrf = "";

/**
 * Asks the host whether this page is logged in.
 * @returns {Promise<{auth?:string, error?:RPCError, down?:boolean}>}
 */
export async function sessionState() {
  try {
    const r = await fetch("/console/session", { credentials: "same-origin", cache: "no-store" });
    const body = await r.json();
    if (!r.ok) return { error: new RPCError(body.error || { code: -32017, message: "not logged in" }) };
    csrf = body.csrf || "";
    return { auth: body.auth };
  } catch {
    return { down: true };
  }
}

/**
 * Exchanges a one-time code for the session cookie.
 * @param {string} code
 * @returns {Promise<RPCError|null>}
 */
export async function login(code) {
  const r = await fetch("/console/login", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }),
  });
  const body = await r.json();
  if (!r.ok) return new RPCError(body.error);
  csrf = body.csrf || "";
  return null;
}

/** The CSRF token for POSTs made by fetch (the WebSocket needs none). */
export function csrfToken() { return csrf; }
