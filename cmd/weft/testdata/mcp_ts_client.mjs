// An agent written with the official TypeScript MCP SDK drives `weft
// mcp-server`: the SDK checks every structured result against the tool's
// output schema. Usage: node mcp_ts_client.mjs SDK_DIR WEFT MODEL
// (environment and working directory are the server's). Prints one JSON
// line with what it saw.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, weft, model] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const client = new Client({ name: "ts-agent", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: weft, args: ["mcp-server", "--local"], env: process.env, cwd: process.cwd(), stderr: "inherit" }));
const out = {};
const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name);
out.withOutputSchema = tools.tools.filter((t) => t.outputSchema).length;
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name}: ${r.content[0].text}`);
  return r.structuredContent;
};
const started = await call("start_run", { prompt: "from typescript", model });
const done = await call("await_run", { runId: started.runId, timeoutSeconds: 20 });
out.status = done.status;
out.answer = done.answer;
await call("get_run", { runId: started.runId });
const page = await call("read_events", { sessionId: started.sessionId, types: ["run.*"] });
out.types = page.events.map((e) => e.type);
await call("list_sessions", {});
await call("list_approvals", {});
await call("create_session", { title: "t" });
await call("cancel_run", { runId: started.runId });
const bad = await client.callTool({ name: "await_run", arguments: { runId: "run_nope" } });
out.badIsError = bad.isError === true;
out.badText = bad.content[0].text;
out.badKind = bad._meta?.["weft.dev/error"]?.kind;
await client.close();
console.log(JSON.stringify(out));
