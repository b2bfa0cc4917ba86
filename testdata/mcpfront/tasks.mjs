// An MCP host made of the official TypeScript SDK client and its
// experimental tasks client (MCP 2025-11-25), driven by a JSON plan, for
// the front's Tasks tests. One JSON object on stdout; diagnostics on stderr.
//
//   node tasks.mjs '<plan JSON>'
//
// plan = {
//   "transport": "stdio" | "http", "command", "args", "env" | "url", "bearer",
//   "elicit": null | {"action": "accept", "content": {...}},
//   "steps": [
//     {"op": "init"},                              // server capabilities + tools
//     {"op": "create", "tool", "args", "ttl"},      // task-augmented call: the CreateTaskResult only
//     {"op": "stream", "tool", "args"},             // callToolStream to the end
//     {"op": "get", "taskId"}, {"op": "result", "taskId"}, {"op": "cancel", "taskId"},
//     {"op": "list"},
//     {"op": "until", "taskId", "status": [...], "timeoutMs"},   // poll tasks/get
//     {"op": "raw", "method", "params"},            // any request, result passed through
//     {"op": "kill9"}                               // SIGKILL the stdio server
//   ]
// }
// A step's "taskId": "$N" is the taskId created by step N.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema, ResultSchema } from '@modelcontextprotocol/sdk/types.js';

const plan = JSON.parse(process.argv[2] ?? '{}');
const out = { steps: [], elicitations: [] };

const capabilities = plan.elicit ? { elicitation: { form: {} } } : {};
const client = new Client({ name: 'agentgw-mcpfront-tasks-test', version: '1.0.0' }, { capabilities });
if (plan.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    out.elicitations.push({ message: req.params.message, requestedSchema: req.params.requestedSchema, meta: req.params._meta ?? null });
    return { action: plan.elicit.action, content: plan.elicit.content };
  });
}

let transport;
if (plan.transport === 'http') {
  const headers = plan.bearer ? { Authorization: `Bearer ${plan.bearer}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(plan.url), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({
    command: plan.command, args: plan.args ?? [], env: { ...process.env, ...(plan.env ?? {}) }, stderr: 'inherit',
  });
}

function errorInfo(e) {
  return { message: String(e?.message ?? e), code: e?.code ?? null, data: e?.data ?? null };
}

const tasks = () => client.experimental.tasks;
const idOf = (step) => {
  const v = step.taskId;
  if (typeof v === 'string' && v.startsWith('$')) return out.steps[Number(v.slice(1))]?.taskId;
  return v;
};

async function run(step) {
  const res = { op: step.op };
  const started = performance.now();
  try {
    switch (step.op) {
      case 'init':
        res.capabilities = client.getServerCapabilities();
        res.protocolVersion = transport.protocolVersion ?? null;
        res.tools = (await client.listTools()).tools;
        break;
      case 'create': {
        const opts = { task: step.ttl ? { ttl: step.ttl } : {}, timeout: 60000 };
        for await (const m of tasks().callToolStream({ name: step.tool, arguments: step.args ?? {} }, CallToolResultSchema, opts)) {
          if (m.type === 'taskCreated') {
            res.task = m.task;
            res.taskId = m.task.taskId;
            break;
          }
          if (m.type === 'error') throw m.error;
          if (m.type === 'result') { res.result = m.result; break; }
        }
        break;
      }
      case 'stream': {
        res.messages = [];
        const opts = { task: {}, timeout: 120000 };
        for await (const m of tasks().callToolStream({ name: step.tool, arguments: step.args ?? {} }, CallToolResultSchema, opts)) {
          if (m.type === 'taskCreated') { res.taskId = m.task.taskId; res.messages.push({ type: m.type, status: m.task.status }); }
          else if (m.type === 'taskStatus') res.messages.push({ type: m.type, status: m.task.status, statusMessage: m.task.statusMessage });
          else if (m.type === 'result') res.result = m.result;
          else if (m.type === 'error') res.error = errorInfo(m.error);
        }
        break;
      }
      case 'get':
        res.task = await tasks().getTask(idOf(step));
        break;
      case 'result':
        res.result = await tasks().getTaskResult(idOf(step), CallToolResultSchema, { timeout: step.timeoutMs ?? 120000 });
        break;
      case 'cancel':
        res.task = await tasks().cancelTask(idOf(step));
        break;
      case 'list':
        res.list = await tasks().listTasks();
        break;
      case 'until': {
        const want = step.status;
        const deadline = Date.now() + (step.timeoutMs ?? 60000);
        res.seen = [];
        for (;;) {
          const t = await tasks().getTask(idOf(step));
          if (res.seen[res.seen.length - 1] !== t.status) res.seen.push(t.status);
          res.task = t;
          if (want.includes(t.status)) break;
          if (Date.now() > deadline) throw new Error(`task still ${t.status} after the wait`);
          await new Promise((r) => setTimeout(r, 100));
        }
        break;
      }
      case 'raw':
        res.result = await client.request({ method: step.method, params: step.params }, ResultSchema);
        break;
      case 'kill9':
        process.kill(transport.pid, 'SIGKILL');
        await new Promise((r) => setTimeout(r, 200));
        break;
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  } catch (e) {
    res.error = errorInfo(e);
  }
  res.ms = performance.now() - started;
  if (step.taskId) res.taskId = res.taskId ?? idOf(step);
  return res;
}

try {
  await client.connect(transport);
  for (const step of plan.steps ?? []) {
    out.steps.push(await run(step));
  }
} catch (e) {
  out.fatal = errorInfo(e);
}
process.stdout.write(JSON.stringify(out) + '\n');
try { await client.close(); } catch { /* the server may be gone (kill9) */ }
process.exit(0);
