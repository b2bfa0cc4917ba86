// Reference OpenAgentNetwork server (Connector Protocol v1) for tests and
// `make demo`, written from shared/references/oan-protocol.md: REST under
// /api/v1 (express) and the Socket.IO namespace /oan (the real socket.io
// from npm). One account. Test switches live under /_control (no auth,
// loopback only) and are not part of the protocol. A second listener plays
// the signed-URL storage host and records whether it ever saw an
// Authorization header.
//
//   node server.mjs [--port N] [--storage-port N]
// prints {"port":N,"storagePort":M} on stdout once listening.
import http from 'node:http';
import crypto from 'node:crypto';
import express from 'express';
import { Server } from 'socket.io';

const args = process.argv.slice(2);
const arg = (name, def) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };

const USER = 'user-' + crypto.randomBytes(4).toString('hex');
const state = {
  codes: new Map(),         // code -> expiresAt
  keys: new Map(),          // sha256(key) -> {id, createdAt}
  gofers: [],               // {goferId, chatId, name, description, discoveryStatus, createdAt}
  events: [],               // recorded envelopes, ascending seq
  seq: 0n,
  pendingQuestion: new Map(), // goferId -> {constraints}
  matchRequests: new Map(), // requestId -> {goferId, decided, conversationId}
  threads: new Map(),       // threadId -> {goferId, awaiting}
  conversations: new Map(), // conversationId -> [{...}]
  banned: false,
  requests: [],             // {method, path, auth, body}
  storageAuthSeen: 0, storageHits: 0,
  mode: { silent: false, duplicate: false, storm5xx: 0, redirect: '', endlessPages: false, replyDelayMs: 20, hostile: '', unreadableReply: false, hostileReplyPath: '' },
};

const sha = (s) => crypto.createHash('sha256').update(s).digest('hex');
const uuid = () => crypto.randomUUID();

function record(type, fields) {
  state.seq += 1n;
  const ev = {
    v: 1, seq: state.seq.toString(), eventId: uuid(), type,
    source: fields.source || 'platform', payload: fields.payload || {}, createdAt: new Date().toISOString(),
  };
  for (const k of ['goferId', 'chatId', 'threadId', 'conversationId', 'responseConstraints', 'reply', 'webUrl']) {
    if (fields[k] !== undefined) ev[k] = fields[k];
  }
  // The hostile switch: every event recorded meanwhile names this reply
  // path (an absolute URL, //host, .., %2F, a query, another account's
  // resource) instead of its own.
  if (state.mode.hostileReplyPath) ev.reply = { method: 'POST', path: state.mode.hostileReplyPath };
  state.events.push(ev);
  emit(ev);
  return ev;
}

function emit(ev) {
  const room = io.of('/oan').to('oan:' + USER);
  room.emit('oan:event', ev);
  if (state.mode.duplicate) {
    room.emit('oan:event', ev); // the same event twice
    const older = state.events[state.events.length - 2];
    if (older) room.emit('oan:event', older); // and an overlapping older one
  }
}

function keyOf(req) {
  const h = req.headers.authorization || '';
  if (!h.startsWith('Bearer ')) return null;
  const k = h.slice(7);
  return state.keys.has(sha(k)) ? k : null;
}

const app = express();
app.use(express.json({ limit: '2mb', strict: false }));
app.use((req, res, next) => {
  if (!req.path.startsWith('/_control')) {
    state.requests.push({ method: req.method, path: req.originalUrl, auth: !!req.headers.authorization, body: req.body ?? null });
  }
  next();
});

// ---- test control -------------------------------------------------------
const ctl = express.Router();
ctl.post('/pairing-code', (req, res) => {
  const code = crypto.randomBytes(8).toString('hex');
  state.codes.set(code, Date.now() + 10 * 60 * 1000);
  res.json({ code });
});
ctl.post('/mode', (req, res) => { Object.assign(state.mode, req.body || {}); res.json(state.mode); });
ctl.get('/log', (req, res) => res.json({ requests: state.requests, storageAuthSeen: state.storageAuthSeen, storageHits: state.storageHits, cursor: state.seq.toString(), events: state.events.length }));
ctl.post('/emit', (req, res) => res.json(record(req.body.type, req.body)));
// A raw (possibly hostile) envelope over the socket only, never recorded.
ctl.post('/raw', (req, res) => { io.of('/oan').to('oan:' + USER).emit('oan:event', req.body); res.json({ ok: true }); });
ctl.post('/match-request', (req, res) => {
  const requestId = uuid(), threadId = uuid();
  state.matchRequests.set(requestId, { goferId: req.body.goferId, decided: false });
  res.json(record('match_request', {
    goferId: req.body.goferId, threadId, source: 'platform',
    payload: { requestId, counterpartRoleName: req.body.counterpartRoleName || 'Counterpart', counterpartSourcePlatform: 'hermes' },
    reply: { method: 'POST', path: `/api/v1/match-requests/${requestId}/decision` },
  }));
});
ctl.post('/pair-proposed', (req, res) => {
  const threadId = uuid();
  const awaiting = req.body.awaiting !== false;
  state.threads.set(threadId, { goferId: req.body.goferId, awaiting });
  const f = { goferId: req.body.goferId, threadId, source: 'platform', payload: { counterpartRoleName: req.body.counterpartRoleName || 'Other Gofer', counterpartSourcePlatform: 'openclaw' } };
  if (awaiting) f.reply = { method: 'POST', path: `/api/v1/threads/${threadId}/pair/confirm` };
  res.json(record('pair_proposed', f));
});
ctl.post('/relay', (req, res) => {
  res.json(record('relay_message', {
    goferId: req.body.goferId, conversationId: req.body.conversationId, source: 'counterpart_party',
    payload: { messageId: uuid(), content: req.body.content, createdAt: new Date().toISOString() },
    reply: { method: 'POST', path: `/api/v1/conversations/${req.body.conversationId}/messages` },
  }));
});
ctl.post('/revoke', async (req, res) => {
  state.keys.clear();
  for (const s of await io.of('/oan').fetchSockets()) s.disconnect(true);
  res.json({ ok: true });
});
// Keys revoked without the forced disconnect (the best-effort disconnect
// of §1.2 failed): only REST says so.
ctl.post('/revoke-quiet', (req, res) => { state.keys.clear(); res.json({ ok: true }); });
ctl.post('/ban', async (req, res) => {
  record('system_notice', { source: 'platform', payload: { kind: 'account_banned' } });
  state.banned = true;
  for (const s of await io.of('/oan').fetchSockets()) s.disconnect(true);
  res.json({ ok: true });
});
// A ban announced by the system_notice only: the sockets stay up (the
// forced disconnect is best effort); REST answers 403 from now on.
ctl.post('/ban-quiet', (req, res) => {
  record('system_notice', { source: 'platform', payload: { kind: 'account_banned' } });
  state.banned = true;
  res.json({ ok: true });
});
ctl.post('/unban', (req, res) => { state.banned = false; res.json({ ok: true }); });
// A transport drop: the Engine.IO connection closes under the namespace.
ctl.post('/drop', async (req, res) => {
  for (const s of io.of('/oan').sockets.values()) s.conn.close();
  res.json({ ok: true });
});
// "io server disconnect" without revoking anything.
ctl.post('/server-disconnect', async (req, res) => {
  for (const s of await io.of('/oan').fetchSockets()) s.disconnect(true);
  res.json({ ok: true });
});
ctl.get('/sockets', async (req, res) => res.json({ count: (await io.of('/oan').fetchSockets()).length }));
app.use('/_control', ctl);

// ---- protocol ------------------------------------------------------------
const api = express.Router();
api.post('/auth/oan/pairing-codes/redeem', (req, res) => {
  const code = req.body && req.body.code;
  const exp = typeof code === 'string' ? state.codes.get(code) : undefined;
  if (!exp || exp < Date.now()) return res.status(401).json({ error: 'errors.invalidPairingCode' });
  state.codes.delete(code);
  const apiKey = 'gofers_' + crypto.randomBytes(24).toString('hex') + (state.mode.hostile === 'newline-key' ? '\nX-Evil: 1' : '');
  state.keys.set(sha(apiKey), { id: uuid(), createdAt: new Date().toISOString() });
  res.json({ apiKey, userId: USER });
});
api.use((req, res, next) => {
  if (state.mode.storm5xx > 0) { state.mode.storm5xx--; return res.status(503).json({ error: 'errors.unavailable' }); }
  if (!keyOf(req)) return res.status(401).json({ error: 'errors.unauthorized' });
  if (state.banned) return res.status(403).json({ error: 'errors.accountBanned' });
  if (state.mode.redirect) return res.redirect(307, state.mode.redirect);
  next();
});
api.get('/api-keys', (req, res) => res.json([...state.keys.values()].map((k) => ({ id: k.id, name: 'connector', createdAt: k.createdAt, expiresAt: null, lastUsedAt: null }))));
api.post('/gofers', (req, res) => {
  const g = { goferId: uuid(), chatId: uuid(), name: 'New Gofer', description: 'A placeholder Gofer', discoveryStatus: 'in_discovery', createdAt: new Date().toISOString() };
  state.gofers.push(g);
  res.status(201).json({ goferId: g.goferId, chatId: g.chatId, greeting: 'Hi! Tell me what you are looking for.' });
});
api.get('/gofers', (req, res) => res.json(state.gofers.map(({ chatId, ...g }) => g)));
api.post('/gofers/:id/chat/messages', (req, res) => {
  const g = state.gofers.find((x) => x.goferId === req.params.id);
  if (!g) return res.status(403).json({ error: 'errors.forbidden' });
  const content = typeof req.body.content === 'string' ? req.body.content.trim() : '';
  if (!content) return res.status(400).json({ error: 'errors.invalidBody' });
  res.status(202).json({ accepted: true });
  if (state.mode.silent) return; // §4: generation failed, no signal at all
  setTimeout(() => reply(g, content), state.mode.replyDelayMs);
});
function reply(g, content) {
  const base = { goferId: g.goferId, chatId: g.chatId, source: 'own_gofer', reply: { method: 'POST', path: `/api/v1/gofers/${g.goferId}/chat/messages` } };
  const pending = state.pendingQuestion.get(g.goferId);
  if (pending) {
    state.pendingQuestion.delete(g.goferId);
    return record('gofer_message', { ...base, payload: { messageId: uuid(), content: 'Thanks, noted: ' + content, createdAt: new Date().toISOString() } });
  }
  const ask = /^ask:(\w+)/.exec(content);
  if (ask) {
    const rc = { boolean: { format: 'boolean' }, enum: { format: 'enum', enumOptions: ['red', 'green', 'blue'] },
      json_schema: { format: 'json_schema', jsonSchema: { type: 'object', properties: { city: { type: 'string' }, budget: { type: 'integer', minimum: 0 } }, required: ['city', 'budget'], additionalProperties: false } },
      maxlength: { format: 'freestyle', maxLength: 10 },
      hostile: { format: 'json_schema', jsonSchema: { $ref: 'https://evil.example/schema.json' } } }[ask[1]];
    state.pendingQuestion.set(g.goferId, rc);
    return record('gofer_question', { ...base, responseConstraints: rc, payload: { messageId: uuid(), content: 'Question (' + ask[1] + '): what do you prefer?', createdAt: new Date().toISOString() } });
  }
  // mode.unreadableReply: a reply whose content is not a string (hostile).
  const said = state.mode.unreadableReply ? { parts: ['Gofer heard: ' + content] } : 'Gofer heard: ' + content;
  record('gofer_message', { ...base, payload: { messageId: uuid(), content: said, createdAt: new Date().toISOString() } });
}
api.get('/events', (req, res) => {
  const since = /^\d+$/.test(req.query.since || '') ? BigInt(req.query.since) : 0n;
  const limit = Math.min(Math.max(parseInt(req.query.limit, 10) || 50, 1), 200);
  if (state.mode.endlessPages) {
    // Hostile: every page is full, forever (fresh noise past since).
    return res.json(Array.from({ length: limit }, (_, i) => ({ v: 1, seq: (since + BigInt(i + 1)).toString(), eventId: uuid(), type: 'system_notice', source: 'platform', payload: { kind: 'noise' }, createdAt: new Date().toISOString() })));
  }
  res.json(state.events.filter((e) => BigInt(e.seq) > since).slice(0, limit));
});
api.get('/events/cursor', (req, res) => res.json({ seq: state.seq.toString() }));
api.get('/events/unresolved', (req, res) => {
  const open = state.events.filter((e) =>
    (e.type === 'gofer_question' && state.pendingQuestion.has(e.goferId)) ||
    (e.type === 'match_request' && state.matchRequests.get(e.payload.requestId) && !state.matchRequests.get(e.payload.requestId).decided) ||
    (e.type === 'pair_proposed' && e.reply && state.threads.get(e.threadId) && state.threads.get(e.threadId).awaiting));
  res.json({ events: open, summary: { pendingQuestions: open.filter((e) => e.type === 'gofer_question').length, goferCount: state.gofers.length, decisions: open.filter((e) => e.type !== 'gofer_question').length } });
});
api.post('/match-requests/:id/decision', (req, res) => {
  const m = state.matchRequests.get(req.params.id);
  if (!m) return res.status(403).json({ error: 'errors.forbidden' });
  if (m.decided) return res.status(400).json({ error: 'errors.alreadyDecided' });
  if (typeof req.body.accept !== 'boolean') return res.status(400).json({ error: 'errors.invalidBody' });
  m.decided = true;
  const out = { ok: true, status: req.body.accept ? 'accepted' : 'rejected', matchId: req.body.accept ? uuid() : null, conversationId: req.body.accept ? uuid() : null };
  if (out.conversationId) state.conversations.set(out.conversationId, []);
  res.json(out);
  record('match_decided', { goferId: m.goferId, conversationId: out.conversationId || undefined, payload: { requestId: req.params.id, status: out.status, matchId: out.matchId, conversationId: out.conversationId } });
});
api.post('/threads/:id/pair/confirm', (req, res) => {
  const t = state.threads.get(req.params.id);
  if (!t) return res.status(404).json({ error: 'errors.notFound' });
  if (!t.awaiting) return res.status(400).json({ error: 'errors.alreadyDecided' });
  t.awaiting = false;
  res.json({ ok: true, accepted: !!req.body.accepted });
});
api.post('/conversations/:id/messages', (req, res) => {
  const c = state.conversations.get(req.params.id);
  if (!c) return res.status(403).json({ error: 'errors.forbidden' });
  const content = typeof req.body.content === 'string' ? req.body.content.trim() : '';
  if (!content) return res.status(400).json({ error: 'errors.invalidBody' });
  const m = { id: uuid(), senderUserId: USER, content, attachments: [], changeSequence: String(c.length + 1), createdAt: new Date().toISOString() };
  c.push(m);
  res.status(201).json(m);
});
api.get('/conversations/:id/attachments/:aid/url', (req, res) => res.json({ url: `http://127.0.0.1:${storagePort}/blob/${req.params.aid}?sig=abc` }));
app.use('/api/v1', api);

const server = http.createServer(app);
const io = new Server(server, { pingInterval: parseInt(arg('--ping-interval', '2000'), 10), pingTimeout: parseInt(arg('--ping-timeout', '2000'), 10), transports: ['websocket'] });
io.of('/oan').use((socket, next) => {
  const token = socket.handshake.auth && socket.handshake.auth.token;
  if (typeof token !== 'string' || !token) return next(new Error('missing token'));
  if (!token.startsWith('gofers_') || !state.keys.has(sha(token))) return next(new Error('invalid token'));
  if (state.banned) return next(new Error('account banned'));
  next();
});
io.of('/oan').on('connection', (socket) => { socket.join('oan:' + USER); });

// The signed-URL storage host: a different origin.
let storagePort = 0;
const storage = http.createServer((req, res) => {
  state.storageHits++;
  if (req.headers.authorization) state.storageAuthSeen++;
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  res.end('blob');
});

storage.listen(parseInt(arg('--storage-port', '0'), 10), '127.0.0.1', () => {
  storagePort = storage.address().port;
  server.listen(parseInt(arg('--port', '0'), 10), '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ port: server.address().port, storagePort }) + '\n');
  });
});
process.on('SIGTERM', () => process.exit(0));
