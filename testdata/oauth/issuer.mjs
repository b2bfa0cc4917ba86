// A real OAuth 2.1 / OpenID Connect authorization server for agentgw's
// tests: oidc-provider (OpenID-certified), configured by the test through
// a JSON file. It issues JWT access tokens bound to a resource (RFC 8707),
// with the caller's JID in a "jid" claim, by client credentials, and by
// authorization code with PKCE through its development login pages (any
// login name, which becomes the subject; the test drives them over HTTP).
// Refresh tokens rotate; revocation (RFC 7009) and introspection are on.
//
// Usage: node issuer.mjs CONFIG.json
// CONFIG: {"port": N, "clients": [...oidc-provider client metadata],
//          "resources": {"<resource URL>": {"scope": "a b", "ttl": S}},
//          "accessTokenTTL": S}
// Prints "READY <issuer URL>" once it listens.
import { readFileSync } from "node:fs";
import Provider from "oidc-provider";
import * as jose from "jose";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const issuer = `http://127.0.0.1:${cfg.port}`;

async function key(alg, kid) {
  const { privateKey } = await jose.generateKeyPair(alg, { extractable: true });
  return { ...(await jose.exportJWK(privateKey)), alg, use: "sig", kid };
}

const provider = new Provider(issuer, {
  clients: cfg.clients,
  jwks: { keys: [await key("RS256", "rs-1"), await key("ES256", "es-1")] },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        const rs = (cfg.resources || {})[resource];
        if (!rs) throw new Provider.errors.InvalidTarget();
        return { scope: rs.scope, audience: resource, accessTokenTTL: rs.ttl || cfg.accessTokenTTL || 300,
          accessTokenFormat: "jwt", jwt: { sign: { alg: "RS256" } } };
      },
    },
  },
  scopes: ["openid", "offline_access", ...new Set(Object.values(cfg.resources || {}).flatMap((r) => r.scope.split(" ")))],
  // Any login is an account whose subject is the login name.
  findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  // The JID the gateway maps a caller to: the account for a user's token,
  // the client id's configured jid for client credentials.
  extraTokenClaims: (ctx, token) => {
    if (token.accountId) return { jid: token.accountId };
    const c = (cfg.clients || []).find((c) => c.client_id === token.clientId);
    return c && c.jid ? { jid: c.jid } : undefined;
  },
  issueRefreshToken: (ctx, client, code) => client.grantTypeAllowed("refresh_token") && code.scopes.has("offline_access"),
  rotateRefreshToken: true,
  loadExistingGrant: async (ctx) => {
    // Consent is implied for the test's clients: grant what was asked.
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope(ctx.oidc.requestParamScopes ? [...ctx.oidc.requestParamScopes].join(" ") : "openid");
    for (const [resource, rs] of Object.entries(cfg.resources || {})) grant.addResourceScope(resource, rs.scope);
    await grant.save();
    return grant;
  },
  ttl: { AccessToken: cfg.accessTokenTTL || 300, ClientCredentials: cfg.accessTokenTTL || 300, RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
});
provider.proxy = false;
provider.on("server_error", (ctx, err) => console.error("server_error", err));
provider.listen(cfg.port, "127.0.0.1", () => console.log(`READY ${issuer}`));
