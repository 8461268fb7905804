// Code generated from weft's method table by `go generate ./console`; DO NOT EDIT.
// The console's client (rpc.js) refuses a method or a param that is not here,
// and a Go test fails when this file differs from the table.
// @ts-check

/** @typedef {{approvalId: string, decision: string, message?: string, sessionId?: string, idempotencyKey?: string}} ApprovalDecideParams */
/** @typedef {{sessionId?: string, status?: string, kind?: string, limit?: number}} ApprovalListParams */
/** @typedef {{sessionId: string}} EnvListParams */
/** @typedef {{sessionId: string, mount: Object, replace?: boolean, expectedBindingVersion?: null|number, injectContext?: boolean, idempotencyKey?: string}} EnvMountParams */
/** @typedef {{sessionId: string, mountId: string, newDefaultMountId?: string, newDefaultShellMountId?: string, expectedBindingVersion?: null|number, injectContext?: boolean, idempotencyKey?: string}} EnvUnmountParams */
/** @typedef {{sessionId: string, after?: number, limit?: number, runId?: string}} EventsReadParams */
/** @typedef {{sessionId: string, after?: number, runId?: string}} EventsSubscribeParams */
/** @typedef {{subscriptionId: string}} EventsUnsubscribeParams */
/** @typedef {{clientInfo: Object, protocolVersion: string}} InitializeParams */
/** @typedef {{requestId: string, text?: string, choice?: null|number, sessionId?: string, idempotencyKey?: string}} InputAnswerParams */
/** @typedef {{sessionId?: string, server: string, name: string, arguments?: Object}} McpGet_promptParams */
/** @typedef {{sessionId?: string, server?: string}} McpPromptsParams */
/** @typedef {{sessionId?: string, server: string, uri: string}} McpRead_resourceParams */
/** @typedef {{sessionId?: string, server?: string}} McpResourcesParams */
/** @typedef {{model?: string, sessionId?: string}} ModelCheckParams */
/** @typedef {{id: string, sessionId?: string, timeoutMs: number}} ProcessAwaitParams */
/** @typedef {{id: string, sessionId?: string, reason?: string, idempotencyKey?: string}} ProcessCancelParams */
/** @typedef {{id: string, sessionId?: string, offset?: number}} ProcessFollowParams */
/** @typedef {{id: string, sessionId?: string}} ProcessGetParams */
/** @typedef {{id: string, sessionId?: string, toSessionId: string, idempotencyKey?: string}} ProcessGrantParams */
/** @typedef {{sessionId?: string, status?: string}} ProcessListParams */
/** @typedef {{id: string, sessionId?: string, offset?: number, limit?: number}} ProcessOutputParams */
/** @typedef {{id: string, sessionId?: string, toSessionId: string, idempotencyKey?: string}} ProcessRevokeParams */
/** @typedef {{id: string, sessionId?: string, name: string, payload?: *, idempotencyKey?: string}} ProcessSignalParams */
/** @typedef {{sessionId: string, command?: string, tool?: string, args?: *, mountId?: string, cwd?: string, env?: Object, disposition?: string, wakeOnExit?: boolean, pty?: boolean, idempotencyKey?: string}} ProcessStartParams */
/** @typedef {{id: string, sessionId?: string, data: string, close?: boolean, idempotencyKey?: string}} ProcessWriteParams */
/** @typedef {{requestId: string}} RequestGetParams */
/** @typedef {{sessionId?: string, status?: string, kind?: string, limit?: number}} RequestListParams */
/** @typedef {{}} RpcDiscoverParams */
/** @typedef {{runId: string, reason?: string, idempotencyKey?: string}} RunCancelParams */
/** @typedef {{runId: string}} RunGetParams */
/** @typedef {{sessionId: string, status?: string}} RunListParams */
/** @typedef {{sessionId: string, input: *, model?: string, maxSteps?: number, busy?: string, policy?: null|Object, defaultPreset?: string, tools?: null|Array<*>, budget?: null|Object, idempotencyKey?: string}} RunStartParams */
/** @typedef {{runId: string, expectedRunId?: string, input: *, idempotencyKey?: string}} RunSteerParams */
/** @typedef {{runId: string, timeoutMs: number}} RunWaitParams */
/** @typedef {{sessionId: string, idempotencyKey?: string}} SessionCompactParams */
/** @typedef {{title?: string, model?: string, metadata?: Object, mounts?: null|Array<*>, network?: string, limits?: null|Object, policy?: null|Object, tools?: null|Array<*>, mcpServers?: Object, budget?: null|Object, idempotencyKey?: string}} SessionCreateParams */
/** @typedef {{sessionId: string, idempotencyKey?: string}} SessionDeleteParams */
/** @typedef {{sessionId: string, atSeq?: number, title?: null|string, mounts?: null|Array<*>, idempotencyKey?: string}} SessionForkParams */
/** @typedef {{sessionId: string, transcript?: string}} SessionGetParams */
/** @typedef {{cursor?: string, limit?: number}} SessionListParams */
/** @typedef {{dryRun?: boolean}} SessionPruneParams */
/** @typedef {{sessionId: string, toSeq: number, files?: boolean, idempotencyKey?: string}} SessionRewindParams */
/** @typedef {{sessionId: string, title?: null|string, model?: null|string, budget?: null|Object, idempotencyKey?: string}} SessionUpdateParams */
/** @typedef {{requestId?: string, callId?: string, sessionId?: string, output: string, isError?: boolean, idempotencyKey?: string}} ToolResultParams */
/** @typedef {{sessionId?: string}} ToolsListParams */

/** Every method: its params' JSON types; a trailing ? marks an optional one. */
export const methods = Object.freeze({
  "approval/decide": Object.freeze({"approvalId": "string", "decision": "string", "message": "string?", "sessionId": "string?", "idempotencyKey": "string?"}),
  "approval/list": Object.freeze({"sessionId": "string?", "status": "string?", "kind": "string?", "limit": "number?"}),
  "env/list": Object.freeze({"sessionId": "string"}),
  "env/mount": Object.freeze({"sessionId": "string", "mount": "Object", "replace": "boolean?", "expectedBindingVersion": "null|number?", "injectContext": "boolean?", "idempotencyKey": "string?"}),
  "env/unmount": Object.freeze({"sessionId": "string", "mountId": "string", "newDefaultMountId": "string?", "newDefaultShellMountId": "string?", "expectedBindingVersion": "null|number?", "injectContext": "boolean?", "idempotencyKey": "string?"}),
  "events/read": Object.freeze({"sessionId": "string", "after": "number?", "limit": "number?", "runId": "string?"}),
  "events/subscribe": Object.freeze({"sessionId": "string", "after": "number?", "runId": "string?"}),
  "events/unsubscribe": Object.freeze({"subscriptionId": "string"}),
  "initialize": Object.freeze({"clientInfo": "Object", "protocolVersion": "string"}),
  "input/answer": Object.freeze({"requestId": "string", "text": "string?", "choice": "null|number?", "sessionId": "string?", "idempotencyKey": "string?"}),
  "mcp/get_prompt": Object.freeze({"sessionId": "string?", "server": "string", "name": "string", "arguments": "Object?"}),
  "mcp/prompts": Object.freeze({"sessionId": "string?", "server": "string?"}),
  "mcp/read_resource": Object.freeze({"sessionId": "string?", "server": "string", "uri": "string"}),
  "mcp/resources": Object.freeze({"sessionId": "string?", "server": "string?"}),
  "model/check": Object.freeze({"model": "string?", "sessionId": "string?"}),
  "process/await": Object.freeze({"id": "string", "sessionId": "string?", "timeoutMs": "number"}),
  "process/cancel": Object.freeze({"id": "string", "sessionId": "string?", "reason": "string?", "idempotencyKey": "string?"}),
  "process/follow": Object.freeze({"id": "string", "sessionId": "string?", "offset": "number?"}),
  "process/get": Object.freeze({"id": "string", "sessionId": "string?"}),
  "process/grant": Object.freeze({"id": "string", "sessionId": "string?", "toSessionId": "string", "idempotencyKey": "string?"}),
  "process/list": Object.freeze({"sessionId": "string?", "status": "string?"}),
  "process/output": Object.freeze({"id": "string", "sessionId": "string?", "offset": "number?", "limit": "number?"}),
  "process/revoke": Object.freeze({"id": "string", "sessionId": "string?", "toSessionId": "string", "idempotencyKey": "string?"}),
  "process/signal": Object.freeze({"id": "string", "sessionId": "string?", "name": "string", "payload": "*?", "idempotencyKey": "string?"}),
  "process/start": Object.freeze({"sessionId": "string", "command": "string?", "tool": "string?", "args": "*?", "mountId": "string?", "cwd": "string?", "env": "Object?", "disposition": "string?", "wakeOnExit": "boolean?", "pty": "boolean?", "idempotencyKey": "string?"}),
  "process/write": Object.freeze({"id": "string", "sessionId": "string?", "data": "string", "close": "boolean?", "idempotencyKey": "string?"}),
  "request/get": Object.freeze({"requestId": "string"}),
  "request/list": Object.freeze({"sessionId": "string?", "status": "string?", "kind": "string?", "limit": "number?"}),
  "rpc.discover": Object.freeze({}),
  "run/cancel": Object.freeze({"runId": "string", "reason": "string?", "idempotencyKey": "string?"}),
  "run/get": Object.freeze({"runId": "string"}),
  "run/list": Object.freeze({"sessionId": "string", "status": "string?"}),
  "run/start": Object.freeze({"sessionId": "string", "input": "*", "model": "string?", "maxSteps": "number?", "busy": "string?", "policy": "null|Object?", "defaultPreset": "string?", "tools": "null|Array<*>?", "budget": "null|Object?", "idempotencyKey": "string?"}),
  "run/steer": Object.freeze({"runId": "string", "expectedRunId": "string?", "input": "*", "idempotencyKey": "string?"}),
  "run/wait": Object.freeze({"runId": "string", "timeoutMs": "number"}),
  "session/compact": Object.freeze({"sessionId": "string", "idempotencyKey": "string?"}),
  "session/create": Object.freeze({"title": "string?", "model": "string?", "metadata": "Object?", "mounts": "null|Array<*>?", "network": "string?", "limits": "null|Object?", "policy": "null|Object?", "tools": "null|Array<*>?", "mcpServers": "Object?", "budget": "null|Object?", "idempotencyKey": "string?"}),
  "session/delete": Object.freeze({"sessionId": "string", "idempotencyKey": "string?"}),
  "session/fork": Object.freeze({"sessionId": "string", "atSeq": "number?", "title": "null|string?", "mounts": "null|Array<*>?", "idempotencyKey": "string?"}),
  "session/get": Object.freeze({"sessionId": "string", "transcript": "string?"}),
  "session/list": Object.freeze({"cursor": "string?", "limit": "number?"}),
  "session/prune": Object.freeze({"dryRun": "boolean?"}),
  "session/rewind": Object.freeze({"sessionId": "string", "toSeq": "number", "files": "boolean?", "idempotencyKey": "string?"}),
  "session/update": Object.freeze({"sessionId": "string", "title": "null|string?", "model": "null|string?", "budget": "null|Object?", "idempotencyKey": "string?"}),
  "tool/result": Object.freeze({"requestId": "string?", "callId": "string?", "sessionId": "string?", "output": "string", "isError": "boolean?", "idempotencyKey": "string?"}),
  "tools/list": Object.freeze({"sessionId": "string?"}),
});

/** The notifications a host sends. */
export const notifications = Object.freeze([
  "events/closed",
  "events/event",
  "process/closed",
  "process/output",
]);

/** The event types of a session's log. */
export const eventTypes = Object.freeze([
  "approval.expired",
  "approval.requested",
  "approval.resolved",
  "budget.raised",
  "checkpoint.recorded",
  "context.compacted",
  "input.requested",
  "input.resolved",
  "mcp.server_failed",
  "message.completed",
  "message.delta",
  "message.user",
  "model.retry",
  "mount.added",
  "mount.info",
  "mount.removed",
  "process.exited",
  "process.started",
  "reasoning.delta",
  "run.cancelled",
  "run.completed",
  "run.failed",
  "run.interrupted",
  "run.queued",
  "run.resumed",
  "run.started",
  "run.suspended",
  "session.created",
  "session.deleted",
  "session.forked",
  "session.rewound",
  "session.updated",
  "steer.accepted",
  "steer.consumed",
  "steer.dropped",
  "step.started",
  "subagent.request",
  "tool.call.completed",
  "tool.call.requested",
  "tool.call.started",
  "tool.progress",
  "usage",
]);
