// An MCP host (the official TypeScript SDK client) that waits for
// notifications/tools/list_changed from `agentgw mcp`, for the catalog push
// test. It prints one JSON line per event on stdout:
//   {"ready": true, "tools": [...]}           after the first tools/list
//   {"changed": n, "tools": [...]}            after each list_changed
// and exits after plan.rounds notifications.
//
//   node listchanged.mjs '{"command": "...", "args": [...], "env": {...}, "rounds": 3}'
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const plan = JSON.parse(process.argv[2] ?? '{}');
const client = new Client({ name: 'agentgw-listchanged-test', version: '1.0.0' }, { capabilities: {} });
const transport = new StdioClientTransport({
  command: plan.command,
  args: plan.args ?? [],
  env: { ...process.env, ...(plan.env ?? {}) },
  stderr: 'inherit',
});
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const names = async () => (await client.listTools()).tools.map((t) => t.name).sort();

let n = 0;
let done;
const finished = new Promise((r) => { done = r; });
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  n++;
  // Printed before listing again, so the time read is the notification's.
  print({ changed: n });
  print({ listed: n, tools: await names() });
  if (n >= (plan.rounds ?? 1)) done();
});
try {
  await client.connect(transport);
  print({ ready: true, tools: await names() });
  await finished;
  await client.close();
  process.exit(0);
} catch (e) {
  print({ fatal: String(e?.message ?? e) });
  process.exit(1);
}
