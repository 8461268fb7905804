// acp-editor.mjs plays an editor against `weft acp` with the official
// ACP TypeScript client (@agentclientprotocol/sdk): it spawns the weft
// binary as Zed does, and drives one scenario. It prints one JSON line
// of results and exits 0, or prints what went wrong and exits 1.
//
//   node acp-editor.mjs SDK_DIR SCENARIO WEFT_BIN CWD [weft args...]
//
// Scenarios:
//   local  initialize, session/new, a prompt whose scripted model calls a
//          gated tool (permission asked, allowed once), a prompt cancelled
//          mid-stream, then SIGKILL weft acp, start it again and
//          session/load: the whole history comes back.
//   serve  (weft acp --host ADDR) a prompt streams; weft acp is killed
//          mid-run; a new one loads the session with the run still
//          streaming, to its end.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, scenario, weftBin, cwd, ...weftArgs] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(sdkDir, "dist/v1/stable/acp.js")).href);
const { client, ndJsonStream, methods, PROTOCOL_VERSION } = sdk;

// start spawns weft acp and connects an ACP client to it.
function start() {
  const t0 = performance.now();
  const child = spawn(weftBin, ["acp", ...weftArgs], { cwd, stdio: ["pipe", "pipe", "inherit"] });
  const ed = { child, t0, updates: [], asked: [], permit: "allow_once", waiters: [] };
  const app = client({ name: "weft-e2e-editor" })
    .onRequest(methods.client.session.requestPermission, async ({ params }) => {
      ed.asked.push(params);
      ed.changed();
      return { outcome: { outcome: "selected", optionId: ed.permit } };
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      ed.updates.push(params.update);
      ed.changed();
    });
  ed.changed = () => {
    for (const w of ed.waiters.splice(0)) w();
  };
  ed.until = async (what, cond, ms = 15000) => {
    const deadline = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; updates: ${JSON.stringify(ed.updates.map(short))}`);
      await new Promise((res) => {
        ed.waiters.push(res);
        setTimeout(res, 100);
      });
    }
  };
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  ed.conn = app.connect(stream);
  ed.agent = ed.conn.agent;
  return ed;
}

async function initialize(ed) {
  const res = await ed.agent.request(methods.agent.initialize, { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
  const ms = performance.now() - ed.t0;
  assert.equal(res.protocolVersion, PROTOCOL_VERSION);
  assert.equal(res.agentCapabilities.loadSession, true);
  assert.equal(res.agentInfo.name, "weft");
  return ms;
}

function kill(ed) {
  return new Promise((res) => {
    ed.child.once("exit", res);
    ed.child.kill("SIGKILL");
  });
}

// short is an update as one line, for comparisons and failures.
function short(u) {
  switch (u.sessionUpdate) {
    case "user_message_chunk":
      return "user: " + u.content.text;
    case "agent_message_chunk":
      return "agent: " + u.content.text;
    case "agent_thought_chunk":
      return "thought: " + u.content.text;
    case "tool_call":
      return `tool_call ${u.toolCallId} ${u.status}`;
    case "tool_call_update":
      return `tool_call_update ${u.toolCallId} ${u.status ?? ""}`;
    case "session_info_update":
      return "title: " + u.title;
    default:
      return u.sessionUpdate;
  }
}

const text = (ups, kind) =>
  ups
    .filter((u) => u.sessionUpdate === kind)
    .map((u) => u.content.text)
    .join("");

const out = {};
try {
  if (scenario === "local") {
    let ed = start();
    out.initializeMs = await initialize(ed);
    const { sessionId, modes } = await ed.agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
    assert.equal(modes.currentModeId, "ask-writes");

    // A prompt whose model calls a gated tool: permission asked, allowed.
    let res = await ed.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "write it" }] });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(ed.asked.length, 1, "one permission request");
    const kinds = ed.asked[0].options.map((o) => o.kind);
    assert.deepEqual(kinds, ["allow_once", "allow_always", "reject_once"]);
    const call = ed.asked[0].toolCall.toolCallId;
    const statuses = ed.updates.filter((u) => u.toolCallId === call).map((u) => u.status);
    assert.deepEqual(statuses, ["in_progress", "completed"]);
    assert.equal(text(ed.updates, "agent_message_chunk"), "I'll write the file.Done.");

    // A prompt cancelled mid-stream.
    const before = ed.updates.length;
    const pending = ed.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "count" }] });
    await ed.until("the first chunk of the second answer", () => ed.updates.length > before);
    await ed.agent.notify(methods.agent.session.cancel, { sessionId });
    res = await pending;
    assert.equal(res.stopReason, "cancelled");
    const partial = text(ed.updates.slice(before), "agent_message_chunk");
    assert.ok(partial.length > 0 && !partial.endsWith("twelve"), `partial answer: ${partial}`);
    const history = ed.updates.map(short);

    // The editor's agent process dies; a new one loads the session.
    await kill(ed);
    ed = start();
    out.reinitializeMs = await initialize(ed);
    const t0 = performance.now();
    let first = 0;
    const firstUpdate = new Promise((res) => ed.waiters.push(() => res(performance.now() - t0)));
    const loaded = await ed.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
    first = await firstUpdate;
    out.loadFirstUpdateMs = first;
    assert.equal(loaded.modes.currentModeId, "ask-writes");
    const replay = ed.updates.map(short);
    // The first prompt titled the session before its run began; the
    // prompts themselves were not echoed live, but are replayed.
    assert.equal(history[0], "title: write it");
    const want = [history[0], "user: write it", ...history.slice(1, before), "user: count", ...history.slice(before)];
    assert.deepEqual(replay, want);
    assert.equal(ed.asked.length, 0, "nothing to ask again");
    out.replayed = replay.length;
    await kill(ed);
  } else if (scenario === "serve") {
    let ed = start();
    out.initializeMs = await initialize(ed);
    const { sessionId } = await ed.agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
    ed.agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "count" }] }).catch(() => {});
    await ed.until("the first chunk", () => text(ed.updates, "agent_message_chunk").length > 0);
    await kill(ed);

    ed = start();
    await initialize(ed);
    await ed.agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
    const atLoad = text(ed.updates, "agent_message_chunk");
    assert.ok(atLoad.length > 0 && !atLoad.endsWith("twelve"), `at load: ${atLoad}`);
    assert.equal(text(ed.updates, "user_message_chunk"), "count");
    await ed.until("the rest of the answer", () => text(ed.updates, "agent_message_chunk").endsWith("twelve"));
    assert.equal(text(ed.updates, "agent_message_chunk"), "one two three four five six seven eight nine ten eleven twelve");
    out.streamedAfterLoad = text(ed.updates, "agent_message_chunk").length - atLoad.length;
    await kill(ed);
  } else {
    throw new Error("unknown scenario " + scenario);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
} catch (err) {
  console.error("acp-editor:", err && err.stack ? err.stack : err);
  process.exit(1);
}
