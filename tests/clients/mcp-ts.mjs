// The TypeScript MCP SDK's client against a live Parley, as an outside agent would use it.
//
//   PARLEY_URL=http://127.0.0.1:8000 PARLEY_TOKEN=… node tests/clients/mcp-ts.mjs <scenario>
//
// Scenarios: `basics` (initialize, tools, post, an `ask` waited for with progress, `pending`),
// `task` (`ask` as a task, the session ended, the answer collected from a second session),
// `cancel` (a waiting `ask` given up with an AbortSignal). It prints one JSON object a line
// ({"event": …}); where the test must act (answer a question, check what Parley stored), it
// waits for a line on stdin. Every error the SDK reports (onerror) is printed at the end.
import { createInterface } from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const URL_ = new URL("/mcp/", process.env.PARLEY_URL ?? "http://127.0.0.1:8000");
const TOKEN = process.env.PARLEY_TOKEN;
const errors = [];
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function say(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");
}

async function told(expected) {
  const { value, done } = await stdin.next();
  if (done || value.trim() !== expected) throw new Error(`expected "${expected}" on stdin`);
}

async function connect(name) {
  const transport = new StreamableHTTPClientTransport(URL_, {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  const client = new Client({ name, version: "1.0.0" });
  const connection = { client, transport, closing: false };
  // Closing aborts the client's open streams, which it reports as errors: not counted.
  client.onerror = (error) => connection.closing || errors.push(String(error?.message ?? error));
  await client.connect(transport);
  return connection;
}

async function end(connection) {
  await connection.transport.terminateSession(); // DELETE: the session ends.
  connection.closing = true;
  await connection.client.close();
}

// A question may wait for people: no client-side timeout shorter than the test's own.
const WAIT = { timeout: 120_000, resetTimeoutOnProgress: true };

async function basics() {
  const connection = await connect("mcp-ts");
  const { client, transport } = connection;
  say("initialized", {
    protocolVersion: transport.protocolVersion,
    server: client.getServerVersion(),
  });
  const { tools } = await client.listTools();
  say("tools", {
    tools: Object.fromEntries(
      tools.map((tool) => [
        tool.name,
        {
          properties: Object.keys(tool.inputSchema.properties ?? {}).sort(),
          required: tool.inputSchema.required ?? [],
          taskSupport: tool.execution?.taskSupport ?? null,
        },
      ]),
    ),
  });
  const posted = await client.callTool({ name: "post", arguments: { text: "Hello from TypeScript." } });
  say("posted", { result: posted.structuredContent, isError: posted.isError ?? false });
  let progress = 0;
  const result = await client.callTool(
    { name: "ask", arguments: { kind: "text", prompt: "A release name?" } },
    CallToolResultSchema,
    {
      ...WAIT,
      onprogress: (note) => {
        progress += 1;
        if (progress === 1) say("progress", { progress: note.progress, message: note.message });
      },
    },
  );
  say("answered", { result: result.structuredContent, text: result.content[0].text, progress });
  const pending = await client.callTool({ name: "pending", arguments: {} });
  say("pending", { result: pending.structuredContent });
  await end(connection);
}

async function task() {
  const first = await connect("mcp-ts-task");
  const stream = first.client.experimental.tasks.callToolStream(
    { name: "ask", arguments: { kind: "confirm", prompt: "Ship it?" } },
    CallToolResultSchema,
    { task: { ttl: 600_000 } },
  );
  let created;
  for await (const message of stream) {
    if (message.type === "taskCreated") {
      created = message.task;
      break; // The caller goes away: it does not wait for the answer here.
    }
    throw new Error(`before the task: ${JSON.stringify(message)}`);
  }
  say("task", { task: created });
  await end(first); // The task lives on.
  say("ended");
  const second = await connect("mcp-ts-later");
  let found = await second.client.experimental.tasks.getTask(created.taskId);
  say("status", { status: found.status });
  while (found.status === "working") {
    await new Promise((resolve) => setTimeout(resolve, found.pollInterval ?? 1000));
    found = await second.client.experimental.tasks.getTask(created.taskId);
  }
  const result = await second.client.experimental.tasks.getTaskResult(
    created.taskId,
    CallToolResultSchema,
  );
  say("collected", { status: found.status, result: result.structuredContent });
  await end(second);
}

async function cancel() {
  const connection = await connect("mcp-ts-cancel");
  const { client } = connection;
  const controller = new AbortController();
  const asking = client.callTool(
    { name: "ask", arguments: { kind: "text", prompt: "Anyone there?" } },
    CallToolResultSchema,
    { ...WAIT, signal: controller.signal },
  );
  say("asking");
  await told("abort");
  controller.abort("The agent gave up");
  try {
    say("unexpected", { result: await asking });
  } catch (error) {
    say("aborted", { error: String(error?.message ?? error) });
  }
  // Once Parley has cancelled the question, a later call on the same session still works, and
  // any response Parley sent to the cancelled request would have arrived by now.
  await told("cancelled");
  const pending = await client.callTool({ name: "pending", arguments: {} });
  say("pending", { result: pending.structuredContent });
  await end(connection);
}

const scenarios = { basics, task, cancel };
const scenario = scenarios[process.argv[2]];
if (!scenario) throw new Error(`a scenario: ${Object.keys(scenarios).join(", ")}`);
let code = 0;
try {
  await scenario();
} catch (error) {
  say("failed", { error: String(error?.stack ?? error) });
  code = 1;
}
say("errors", { errors });
process.exit(code); // stdin, still open, would keep Node running.
