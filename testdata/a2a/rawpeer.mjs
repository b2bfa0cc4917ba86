// A raw A2A 0.3 JSON-RPC server (node's http module, no SDK) that writes
// the SSE frames itself, so it can send what the SDKs refuse to build:
// results the bridge cannot carry. The peer behind [agents.a2a] in
// e2e/a2a's TestA2ABackendUnreadableResults. Skills (the
// message metadata "agentgw/skill"):
//   oddpart — one artifact whose part has an unknown kind ("video");
//   big     — one artifact event with a text of 200 KiB (over a 64 KiB
//             line scanner, far under the documented 16 MiB event cap);
//   bigmsg  — a direct Message reply (no task) with a text of 200 KiB;
//   huge    — one artifact event of 17 MiB (over the event cap);
//   many    — 17 artifact chunks of 1 MiB each (over the 16 MiB result cap);
//   empty   — completes with no artifact and no message (a true empty result);
//   rewrite — artifact A "draft", then A again with append:false "final"
//             (a replacement), then B "x" and B with append:true "y": the
//             result is final, x, y.
// tasks/get answers the whole task. tasks/resubscribe of a settled task
// answers its snapshot, or with argv[2] {"resubscribe":"status"} only its
// final status (as a server that keeps no event history may).
// It prints "listening <port>".
import http from 'node:http';

const opts = JSON.parse(process.argv[2] || '{}');

const tasks = new Map(); // id → task object (A2A 0.3 JSON)
const KiB = 1024, MiB = 1024 * KiB;
const text = (n, c) => c.repeat(n);

function artifactsFor(skill) {
  switch (skill) {
    case 'oddpart': return [[{ kind: 'video', uri: 'http://127.0.0.1/clip' }]];
    case 'big': return [[{ kind: 'text', text: text(200 * KiB, 'b') }]];
    case 'huge': return [[{ kind: 'text', text: text(17 * MiB, 'h') }]];
    case 'many': return Array.from({ length: 17 }, () => [{ kind: 'text', text: text(MiB, 'm') }]);
    default: return [];
  }
}

// rewriteEvents are the artifact updates of the rewrite skill.
function rewriteEvents(taskId) {
  const a = (id, t, append) => ({ artifact: { artifactId: id + '-' + taskId, name: id, parts: [{ kind: 'text', text: t }] }, append });
  return [a('A', 'draft', false), a('A', 'final', false), a('B', 'x', false), a('B', 'y', true)];
}

function card(port) {
  const skill = (id) => ({ id, name: id, description: 'raw peer skill ' + id, tags: ['test'] });
  return {
    name: 'raw peer', description: 'A2A 0.3 JSON-RPC without an SDK', url: `http://127.0.0.1:${port}/rpc`,
    preferredTransport: 'JSONRPC', protocolVersion: '0.3.0', version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: ['oddpart', 'big', 'bigmsg', 'huge', 'many', 'empty', 'rewrite'].map(skill),
  };
}

function sse(res) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  return (id, result) => res.write('data: ' + JSON.stringify({ jsonrpc: '2.0', id, result }) + '\n\n');
}

function stream(req, res, id, params) {
  const m = params.message;
  const skill = (params.metadata && params.metadata['agentgw/skill']) || (m.metadata && m.metadata['agentgw/skill']);
  console.log('exec ' + skill);
  const send = sse(res);
  if (skill === 'bigmsg') {
    send(id, { kind: 'message', messageId: 'r-' + m.messageId, role: 'agent', parts: [{ kind: 'text', text: text(200 * KiB, 'g') }] });
    return res.end();
  }
  const taskId = 'rt-' + m.messageId, contextId = 'rc-' + m.messageId;
  const chunks = artifactsFor(skill);
  const task = { kind: 'task', id: taskId, contextId, status: { state: 'completed' }, artifacts: [] };
  send(id, { kind: 'task', id: taskId, contextId, status: { state: 'submitted' } });
  send(id, { kind: 'status-update', taskId, contextId, status: { state: 'working' }, final: false });
  chunks.forEach((parts, i) => {
    const artifact = { artifactId: 'a-' + taskId, name: 'result', parts };
    send(id, { kind: 'artifact-update', taskId, contextId, artifact, append: i > 0, lastChunk: i === chunks.length - 1 });
    if (i === 0) task.artifacts.push({ artifactId: artifact.artifactId, name: 'result', parts: [...parts] });
    else task.artifacts[0].parts.push(...parts);
  });
  if (skill === 'rewrite') {
    for (const ev of rewriteEvents(taskId)) {
      send(id, { kind: 'artifact-update', taskId, contextId, artifact: ev.artifact, append: ev.append, lastChunk: false });
    }
    task.artifacts = [
      { artifactId: 'A-' + taskId, name: 'A', parts: [{ kind: 'text', text: 'final' }] },
      { artifactId: 'B-' + taskId, name: 'B', parts: [{ kind: 'text', text: 'x' }, { kind: 'text', text: 'y' }] },
    ];
  }
  tasks.set(taskId, task);
  send(id, { kind: 'status-update', taskId, contextId, status: { state: 'completed' }, final: true });
  res.end();
}

const server = http.createServer((req, res) => {
  const port = server.address().port;
  if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.end(JSON.stringify(card(port)));
  }
  if (req.method !== 'POST' || req.url !== '/rpc') {
    res.writeHead(404);
    return res.end();
  }
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    let r;
    try { r = JSON.parse(body); } catch { res.writeHead(400); return res.end(); }
    const json = (obj) => { res.writeHead(200, { 'Content-Type': 'application/json' }); res.end(JSON.stringify({ jsonrpc: '2.0', id: r.id, ...obj })); };
    const t = r.params && tasks.get(r.params.id);
    switch (r.method) {
      case 'message/stream':
        return stream(req, res, r.id, r.params);
      case 'tasks/get':
        return t ? json({ result: t }) : json({ error: { code: -32001, message: 'task not found' } });
      case 'tasks/resubscribe':
        if (!t) return json({ error: { code: -32001, message: 'task not found' } });
        if (opts.resubscribe === 'status') {
          sse(res)(r.id, { kind: 'status-update', taskId: t.id, contextId: t.contextId, status: t.status, final: true });
        } else {
          sse(res)(r.id, t);
        }
        return res.end();
      case 'tasks/cancel':
        return json({ error: { code: -32002, message: 'task not cancelable' } });
      default:
        return json({ error: { code: -32601, message: 'method not found' } });
    }
  });
});
server.listen(0, '127.0.0.1', () => console.log('listening ' + server.address().port));
