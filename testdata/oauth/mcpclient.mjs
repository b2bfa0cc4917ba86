// An MCP host made of the official TypeScript SDK client with its OAuth
// client (client credentials), for the tests of `agentgw mcp --http
// --issuer`: the SDK meets the front's 401, reads the Protected Resource
// Metadata it points at (RFC 9728), discovers the authorization server,
// gets a token for the front's resource (RFC 8707) and retries. One JSON
// object on stdout; diagnostics on stderr.
//
//   node mcpclient.mjs '<plan JSON>'
//
// plan = {"url": "http://127.0.0.1:PORT/", "clientId", "clientSecret", "scope",
//         "steps": [{"op": "list"}, {"op": "call", "tool", "args"}]}
// out  = {"fetches": [{"method", "url", "status", "challenge"}], "steps": [...], "fatal"?}
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const plan = JSON.parse(process.argv[2] ?? '{}');
const out = { fetches: [], steps: [] };

// Every HTTP exchange the SDK makes, the discovery's included.
const recording = async (url, init) => {
  const res = await fetch(url, init);
  out.fetches.push({ method: init?.method ?? 'GET', url: String(url), status: res.status, challenge: res.headers.get('www-authenticate') });
  return res;
};

const authProvider = new ClientCredentialsProvider({ clientId: plan.clientId, clientSecret: plan.clientSecret, scope: plan.scope });
const transport = new StreamableHTTPClientTransport(new URL(plan.url), { authProvider, fetch: recording });
const client = new Client({ name: 'agentgw-oauth-test', version: '1.0.0' }, { capabilities: {} });

function errorInfo(e) {
  return { message: String(e?.message ?? e), code: e?.code ?? null };
}

try {
  await client.connect(transport);
  for (const step of plan.steps ?? []) {
    if (step.op === 'list') {
      const r = await client.listTools();
      out.steps.push({ op: 'list', tools: r.tools.map((t) => t.name).sort() });
    } else if (step.op === 'call') {
      try {
        const r = await client.callTool({ name: step.tool, arguments: step.args ?? {} });
        out.steps.push({ op: 'call', result: r });
      } catch (e) {
        out.steps.push({ op: 'call', error: errorInfo(e) });
      }
    }
  }
  out.token = Boolean(authProvider.tokens()?.access_token);
  await client.close();
} catch (e) {
  out.fatal = errorInfo(e);
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
