// A real A2A server built with the official JS SDK (@a2a-js/sdk 1.3.0,
// DefaultRequestHandler + its Express handlers with v0.3 compatibility),
// used as the peer behind [agents.a2a] in a2abridge's tests. Skills:
//   echo  — completes with an artifact "echo: <text>" and a data part;
//   long  — N working updates ~50 ms apart, then completes; honours cancel;
//   ask   — input-required "What is your name?", then "hello <answer>";
//   stuck — works forever and ignores cancel (the bridge must not hang);
//   slow  — opts.slowSteps (40) working updates 250 ms apart, then
//           completes with "slow done after N steps"; honours cancel.
// Argv[2] is JSON: {"mode": "normal"|"huge-card"|"redirect-card"|"foreign-url", "redirect": URL,
// "v10": true (the card lists a JSON-RPC interface of A2A 1.0 only), "slowSteps": N,
// "sign": true (the card is signed with a fresh ES256 key, whose public JWK
// is printed as "jwk <json>"), "tamper": true (the signed card is then changed)}.
// It prints "listening <port>" and then one line "exec <skill> <taskId>"
// per execution (the tests count executions).
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { jsonRpcHandler, agentCardHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { TaskState, Role, generateAgentCardSignature } from '@a2a-js/sdk';
import * as jose from 'jose';

const opts = JSON.parse(process.argv[2] || '{}');
const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  console.log('listening ' + server.address().port);
});
const port = () => server.address()?.port ?? 0;

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const data = (value) => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: '' });
const msg = (taskId, contextId, parts) => ({ messageId: crypto.randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] });
const status = (taskId, contextId, state, parts) => AgentEvent.statusUpdate({ taskId, contextId, status: { state, message: parts ? msg(taskId, contextId, parts) : undefined, timestamp: new Date().toISOString() }, metadata: undefined });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function card() {
  const base = opts.mode === 'foreign-url' ? 'http://other.invalid:9' : 'http://127.0.0.1:' + port();
  const skill = (id, name, description) => ({ id, name, description, tags: ['test'], examples: [], inputModes: ['text/plain'], outputModes: ['text/plain'], securityRequirements: [] });
  const c = {
    name: 'JS test agent', description: 'An A2A agent from the official JS SDK' + (opts.mode === 'huge-card' ? 'x'.repeat(400000) : ''),
    supportedInterfaces: [{ url: base + '/rpc', protocolBinding: 'JSONRPC', tenant: '', protocolVersion: opts.v10 ? '1.0' : '0.3' }],
    provider: undefined, version: '1.2.3', documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [skill('echo', 'Echo', 'Echoes the text'), skill('long', 'Long', 'Works in steps'), skill('ask', 'Ask', 'Asks a question'), skill('stuck', 'Stuck', 'Never ends'), ...(opts.slowSteps ? [skill('slow', 'Slow', 'Works for about ten seconds')] : [])],
    signatures: [], iconUrl: undefined,
  };
  return c;
}

const cancelled = new Set();
const running = new Set(); // tasks inside a working loop (they stop themselves)
const contexts = new Map();
const executor = {
  async execute(rc, bus) {
    const taskId = rc.taskId, contextId = rc.contextId;
    contexts.set(taskId, contextId);
    const m = rc.userMessage;
    const skill = (m.metadata && m.metadata['agentgw/skill']) || 'echo';
    const words = m.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');
    if (!rc.task) {
      console.log('exec ' + skill + ' ' + taskId);
      bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: undefined }, artifacts: [], history: [m], metadata: { skill } }));
    } else {
      bus.publish(AgentEvent.task(rc.task));
    }
    const art = (parts) => AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: 'a-' + taskId, name: 'result', description: '', parts, metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined });
    const ofTask = (rc.task?.metadata?.skill) || skill;
    if (ofTask === 'ask') {
      if (!rc.task) {
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, [text('What is your name?')]));
      } else {
        bus.publish(art([text('hello ' + words)]));
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
      }
      bus.finished();
      return;
    }
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, [text('started ' + skill)]));
    running.add(taskId);
    if (ofTask === 'slow') {
      const n = opts.slowSteps || 40;
      for (let i = 1; i <= n; i++) {
        await sleep(250);
        if (cancelled.has(taskId)) {
          bus.publish(status(taskId, contextId, TaskState.TASK_STATE_CANCELED, [text('stopped at step ' + i)]));
          bus.finished();
          return;
        }
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, [text('slow step ' + i + ' of ' + n)]));
      }
      bus.publish(art([text('slow done after ' + n + ' steps')]));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
      bus.finished();
      return;
    }
    if (ofTask === 'long' || ofTask === 'stuck') {
      const n = ofTask === 'long' ? 5 : 100000;
      for (let i = 1; i <= n; i++) {
        await sleep(ofTask === 'long' ? 300 : 50); // long lasts 1.5 s: a cancel lands under load
        if (cancelled.has(taskId) && ofTask === 'long') {
          bus.publish(status(taskId, contextId, TaskState.TASK_STATE_CANCELED, [text('stopped at step ' + i)]));
          bus.finished();
          return;
        }
        bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, [text('step ' + i + ' of ' + n)]));
      }
    }
    bus.publish(art([text('echo: ' + words), data({ words: words.split(' ').length })]));
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    console.log('exec cancel ' + taskId);
    cancelled.add(taskId);
    if (!running.has(taskId)) {
      // Waiting for input: nothing runs that would report the cancellation.
      bus.publish(status(taskId, contexts.get(taskId), TaskState.TASK_STATE_CANCELED, [text('cancelled while waiting for input')]));
      bus.finished();
    }
  },
};

let signer;
if (opts.sign) {
  const { publicKey, privateKey } = await jose.generateKeyPair('ES256');
  const jwk = await jose.exportJWK(publicKey);
  jwk.kid = 'test-agent-key';
  jwk.alg = 'ES256';
  console.log('jwk ' + JSON.stringify(jwk));
  signer = generateAgentCardSignature(privateKey, { alg: 'ES256', kid: jwk.kid, typ: 'JOSE' });
}
async function servedCard() {
  if (!signer) return card();
  const signed = await signer(card());
  if (opts.tamper) signed.description += ' (changed after signing)';
  return signed;
}

const handler = new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor);
handler.getAgentCard = async () => card();
if (opts.mode === 'redirect-card') {
  app.get('/.well-known/agent-card.json', (req, res) => res.redirect(307, opts.redirect));
} else {
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: servedCard, legacyCompat: { enabled: true } }));
}
// The W3C trace context the gateway sends, for the telemetry test.
app.use('/rpc', (req, res, next) => {
  if (req.headers.traceparent) console.log('traceparent ' + req.headers.traceparent);
  next();
});
app.use('/rpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
