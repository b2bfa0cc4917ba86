// A2A client driven by a JSON plan, with the official JS SDK
// (@a2a-js/sdk 1.3.0): its v0.3 JSON-RPC transport by default, or, with
// plan.proto "1.0-jsonrpc" / "1.0-rest", a 1.0 Client the SDK's
// ClientFactory makes from the agent's card (it picks the card's 1.0
// interface of that binding and sends A2A-Version: 1.0); "0.3-rest" is
// the v0.3 HTTP+JSON transport. It prints one JSON object:
// {"steps":[...]} with each step's outcome, or {"fatal":{...}}.
// Used by a2abridge/front's end-to-end tests and benchmarks.
import { LegacyJsonRpcTransport, LegacyRestTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory, DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { TaskState, Role, taskStateToJSON, verifyAgentCardSignature } from '@a2a-js/sdk';
import * as jose from 'jose';

// The SDK's verifier logs failed entries with console.debug: keep stdout
// for the result.
console.debug = (...a) => console.error(...a);
const plan = JSON.parse(process.argv[2]);
const auth = { Authorization: 'Bearer ' + plan.bearer };
const fetchImpl = (url, init = {}) => fetch(url, { ...init, headers: { ...(init.headers || {}), ...auth } });

const proto = plan.proto || '0.3';
const clients = new Map();
async function transport(jid) {
  const endpoint = plan.base + '/agents/' + encodeURIComponent(jid);
  if (proto === '0.3') return new LegacyJsonRpcTransport({ endpoint, fetchImpl });
  if (proto === '0.3-rest') return new LegacyRestTransport({ endpoint: endpoint + '/rest', fetchImpl });
  if (!clients.has(jid)) {
    const factory = new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      preferredTransports: [proto === '1.0-rest' ? 'HTTP+JSON' : 'JSONRPC'],
    });
    const client = await factory.createFromUrl(endpoint + '/.well-known/agent-card.json', '');
    if (client.protocolVersion !== '1.0') throw new Error('the factory chose protocol ' + client.protocolVersion);
    clients.set(jid, client);
  }
  return clients.get(jid);
}

function parts(step) {
  const out = [];
  if (step.text !== undefined) out.push({ content: { $case: 'text', value: step.text }, metadata: undefined, filename: '', mediaType: '' });
  if (step.data !== undefined) out.push({ content: { $case: 'data', value: step.data }, metadata: undefined, filename: '', mediaType: '' });
  return out;
}

// pushConfig is a step's push config ({url, token, id, scheme,
// credentials, tokenRepeat}) as the SDK's TaskPushNotificationConfig.
function pushConfig(p, taskId) {
  if (!p) return undefined;
  const authentication = p.scheme ? { scheme: p.scheme, credentials: p.credentials || '' } : undefined;
  const token = p.tokenRepeat ? 't'.repeat(p.tokenRepeat) : (p.token || ''); // a huge token without a huge argv
  return { tenant: '', id: p.id || '', taskId: taskId || '', url: p.url, token, authentication };
}

function request(step, taskId) {
  const md = step.skill ? { 'agentgw/skill': step.skill } : undefined;
  return {
    tenant: '',
    message: { messageId: step.messageId || crypto.randomUUID(), contextId: step.contextId || '', taskId: taskId || '', role: Role.ROLE_USER, parts: parts(step), metadata: md, extensions: [], referenceTaskIds: [] },
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(step.push, ''), returnImmediately: step.blocking === false },
    metadata: undefined,
  };
}

function partJSON(p) {
  const c = p.content || {};
  return { kind: c.$case, value: c.$case === 'raw' ? '<bytes>' : c.value, metadata: p.metadata };
}

function taskJSON(t) {
  return {
    id: t.id, contextId: t.contextId,
    state: taskStateToJSON(t.status?.state),
    message: t.status?.message ? t.status.message.parts.map(partJSON) : undefined,
    artifacts: (t.artifacts || []).map(a => ({ id: a.artifactId, parts: a.parts.map(partJSON), metadata: a.metadata })),
    metadata: t.metadata,
  };
}

function eventJSON(ev) {
  const p = ev.payload || {};
  switch (p.$case) {
    case 'task': return { kind: 'task', ...taskJSON(p.value) };
    case 'statusUpdate': return { kind: 'status', taskId: p.value.taskId, state: taskStateToJSON(p.value.status?.state), message: p.value.status?.message ? p.value.status.message.parts.map(partJSON) : undefined };
    case 'artifactUpdate': return { kind: 'artifact', taskId: p.value.taskId, parts: p.value.artifact.parts.map(partJSON), lastChunk: p.value.lastChunk };
    case 'message': return { kind: 'message', parts: p.value.parts.map(partJSON) };
  }
  return { kind: 'unknown' };
}

function errJSON(e) {
  return { message: String(e?.message || e), code: e?.code ?? e?.envelopeCode };
}

async function collect(gen, step, out) {
  const t0 = performance.now();
  for await (const ev of gen) {
    const j = eventJSON(ev);
    j.atMs = performance.now() - t0;
    out.events.push(j);
    // A test that acts on a running stream waits for this line on stderr.
    if (step.signal && out.events.length === 1) process.stderr.write(step.signal + '\n');
    if (j.taskId) out.taskId = j.taskId;
    if (j.kind === 'task') out.taskId = j.id;
    if (step.stopAfter && out.events.length >= step.stopAfter) break;
  }
}

const results = [];
const ids = {};
async function run(step) {
  const taskId = step.taskId || (step.taskOf !== undefined ? ids[step.taskOf] : undefined);
  switch (step.op) {
    case 'agents': {
      const r = await fetchImpl(plan.base + '/agents');
      return { status: r.status, body: r.status === 200 ? await r.json() : await r.text() };
    }
    case 'card': {
      const r = await fetchImpl(plan.base + '/agents/' + encodeURIComponent(step.jid) + '/.well-known/agent-card.json');
      return { status: r.status, body: r.status === 200 ? await r.json() : await r.text() };
    }
    case 'send': {
      const r = await (await transport(step.jid)).sendMessage(request(step, taskId));
      // The SDK returns the Task (or a Message) itself.
      if (r.payload?.$case === 'task') return { task: taskJSON(r.payload.value) };
      if (r.id && r.status) return { task: taskJSON(r) };
      return { message: r };
    }
    case 'stream': {
      const out = { events: [] };
      await collect((await transport(step.jid)).sendMessageStream(request(step, taskId)), step, out);
      return out;
    }
    case 'resubscribe': {
      const out = { events: [] };
      await collect((await transport(step.jid)).resubscribeTask({ tenant: '', id: taskId }), step, out);
      return out;
    }
    case 'get':
      return { task: taskJSON(await (await transport(step.jid)).getTask({ tenant: '', id: taskId })) };
    case 'verifycard': {
      // The card as a 1.0 client gets it, verified with the SDK's
      // verifier against the front's JWKS (kid from the protected header).
      const r = await fetchImpl(plan.base + '/agents/' + encodeURIComponent(step.jid) + '/.well-known/agent-card.json', { headers: { 'A2A-Version': step.version || '1.0' } });
      const card = await r.json();
      if (step.tamper) card.description = (card.description || '') + ' (tampered)';
      const jwks = await (await fetchImpl(plan.base + '/jwks.json')).json();
      try {
        await verifyAgentCardSignature(async (kid) => jose.importJWK(jwks.keys.find((k) => k.kid === kid), 'ES256'))(card);
        return { verified: true, signatures: card.signatures.length };
      } catch (e) {
        return { verified: false, reason: String(e.message || e) };
      }
    }
    case 'pushcreate': {
      const c = await (await transport(step.jid)).createTaskPushNotificationConfig(pushConfig({ id: step.configId || 'cfg-1', url: step.url, token: step.token, tokenRepeat: step.tokenRepeat, scheme: step.scheme, credentials: step.credentials }, taskId));
      return { push: { id: c.id, url: c.url, taskId: c.taskId } };
    }
    case 'pushlist': {
      const r = await (await transport(step.jid)).listTaskPushNotificationConfig({ tenant: '', taskId, pageSize: 0, pageToken: '' });
      return { push: { n: (r.configs || []).length } };
    }
    case 'list': {
      const r = await (await transport(step.jid)).listTasks({ tenant: '', contextId: step.contextId || '', status: 0, pageSize: step.pageSize || 0, pageToken: step.pageToken || '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: !!step.includeArtifacts });
      return { list: { tasks: (r.tasks || []).map(taskJSON), nextPageToken: r.nextPageToken, pageSize: r.pageSize, totalSize: r.totalSize } };
    }
    case 'cancel':
      return { task: taskJSON(await (await transport(step.jid)).cancelTask({ tenant: '', id: taskId, metadata: undefined })) };
    case 'bench': {
      const lat = [];
      for (let i = 0; i < (step.warmup || 0); i++) {
        await (await transport(step.jid)).sendMessage(request({ ...step, messageId: undefined }));
      }
      for (let i = 0; i < step.n; i++) {
        const t0 = performance.now();
        await (await transport(step.jid)).sendMessage(request({ ...step, messageId: undefined }));
        lat.push(performance.now() - t0);
      }
      lat.sort((a, b) => a - b);
      return { n: lat.length, p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))] };
    }
    case 'raw': {
      const r = await fetchImpl(plan.base + '/agents/' + encodeURIComponent(step.jid) + (step.path || ''), { method: step.method || 'POST', headers: { 'Content-Type': 'application/json', ...(step.headers || {}) }, body: step.body });
      return { status: r.status, body: await r.text() };
    }
  }
  throw new Error('unknown op ' + step.op);
}

try {
  for (const step of plan.steps) {
    let res;
    try {
      res = await run(step);
    } catch (e) {
      res = { error: errJSON(e) };
    }
    res.op = step.op;
    results.push(res);
    ids[results.length - 1] = res.taskId || res.task?.id;
  }
  process.stdout.write(JSON.stringify({ steps: results }));
} catch (e) {
  process.stdout.write(JSON.stringify({ fatal: errJSON(e) }));
}
