// An MCP host made of the official TypeScript SDK client, driven by a JSON
// plan, for agentgw's MCP front tests and benchmark. It prints one JSON
// object on stdout; diagnostics go to stderr.
//
//   node client.mjs '<plan JSON>'
//
// plan = {
//   "transport": "stdio" | "http",
//   "command": "/path/agentgw", "args": [...], "env": {...},   // stdio
//   "url": "http://127.0.0.1:PORT/", "bearer": "token",         // http
//   "elicit": null | {"action": "accept", "content": {...}},   // declares elicitation when set
//   "steps": [
//     {"op": "list"},
//     {"op": "call", "tool": "NAME", "args": {...}, "progress": true,
//      "cancelAfterProgress": 1, "timeoutMs": 60000},
//     {"op": "bench", "tool": "NAME", "args": {...}, "n": 200, "warmup": 20}
//   ]
// }
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const plan = JSON.parse(process.argv[2] ?? '{}');
const out = { steps: [], elicitations: [] };

const capabilities = plan.elicit ? { elicitation: { form: {} } } : {};
const client = new Client({ name: 'agentgw-mcpfront-test', version: '1.0.0' }, { capabilities });
if (plan.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    out.elicitations.push({ message: req.params.message, requestedSchema: req.params.requestedSchema });
    return { action: plan.elicit.action, content: plan.elicit.content };
  });
}

let transport;
if (plan.transport === 'http') {
  const headers = plan.bearer ? { Authorization: `Bearer ${plan.bearer}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(plan.url), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({
    command: plan.command,
    args: plan.args ?? [],
    env: { ...process.env, ...(plan.env ?? {}) },
    stderr: 'inherit',
  });
}

function errorInfo(e) {
  return { message: String(e?.message ?? e), code: e?.code ?? null, data: e?.data ?? null };
}

async function callStep(step) {
  const res = { op: 'call', tool: step.tool, progress: [] };
  const ac = new AbortController();
  const opts = { signal: ac.signal, timeout: step.timeoutMs ?? 120000, resetTimeoutOnProgress: true };
  if (step.progress || step.cancelAfterProgress) {
    opts.onprogress = (p) => {
      res.progress.push(p);
      if (step.cancelAfterProgress && res.progress.length >= step.cancelAfterProgress && !ac.signal.aborted) {
        // Progress notifications of the front carry the task in _meta.
        res.cancelled = true;
        ac.abort('test cancels');
      }
    };
  }
  const started = performance.now();
  try {
    res.result = await client.callTool({ name: step.tool, arguments: step.args ?? {} }, undefined, opts);
  } catch (e) {
    res.error = errorInfo(e);
  }
  res.ms = performance.now() - started;
  return res;
}

async function benchStep(step) {
  const args = step.args ?? {};
  for (let i = 0; i < (step.warmup ?? 10); i++) {
    await client.callTool({ name: step.tool, arguments: args });
  }
  const ms = [];
  for (let i = 0; i < (step.n ?? 100); i++) {
    const t = performance.now();
    const r = await client.callTool({ name: step.tool, arguments: args });
    ms.push(performance.now() - t);
    if (r.isError) throw new Error(`bench call failed: ${JSON.stringify(r.content)}`);
  }
  ms.sort((a, b) => a - b);
  const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))];
  return { op: 'bench', tool: step.tool, n: ms.length, p50: q(0.5), p99: q(0.99), min: ms[0], max: ms[ms.length - 1] };
}

let status = 0;
try {
  await client.connect(transport);
  out.serverInfo = client.getServerVersion();
  out.protocolVersion = transport.protocolVersion ?? null;
  for (const step of plan.steps ?? []) {
    switch (step.op) {
      case 'list': {
        const tools = [];
        let cursor;
        do {
          const page = await client.listTools(cursor ? { cursor } : {});
          tools.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor);
        out.steps.push({ op: 'list', tools });
        break;
      }
      case 'call':
        out.steps.push(await callStep(step));
        break;
      case 'bench':
        out.steps.push(await benchStep(step));
        break;
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }
} catch (e) {
  out.fatal = errorInfo(e);
  status = 1;
} finally {
  try { await client.close(); } catch { /* closing a dead transport */ }
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(status);
