// A real OpenID provider (npm `oidc-provider`, OpenID-certified) for
// Partita's browser tests. No forms: the user named by the authorization
// request's `login_hint` (default `alice`) is logged in and consents at
// once; RP-initiated logout needs no confirmation either.
//
// Configuration, from argv or the environment (argv wins):
//   --port N                       OP_PORT                       0 (any free port)
//   --redirect-uri URI (repeat)    OP_REDIRECT_URIS (comma- or space-separated)
//   --post-logout-redirect-uri URI OP_POST_LOGOUT_REDIRECT_URIS  the redirect URIs' origins + "/"
//   --users JSON                   OP_USERS                      {}
// OP_USERS maps a user (the `sub`) to its groups, e.g.
// {"lena":["team:vision","role:lead"],"ada":["role:admin"]}; users not in
// it exist too, with no groups.
//
// The client: client_id `partita`, client_secret `partita-test-secret`
// (client_secret_basic), code flow, PKCE S256 required. Scopes `openid
// email profile groups`; the ID token carries sub, email (<sub>@example.test),
// email_verified, name and groups (an array of strings).
//
// Prints `OP ready <issuer>` on stdout once it listens (the issuer is
// http://127.0.0.1:PORT, the port chosen when 0) and exits when its stdin
// closes, so it dies with the process that started it.

import * as crypto from 'node:crypto';
import * as http from 'node:http';
import { parseArgs } from 'node:util';

// oidc-provider 9 calls crypto.hash and URL.parse (Node 20.18+); it warns
// "Unsupported runtime" below Node 22, but works on 20.
{
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 18)) {
    console.error(`op.mjs: Node.js ${process.versions.node} is too old; oidc-provider 9 needs 20.18 or later`);
    process.exit(1);
  }
}
const { default: Provider } = await import('oidc-provider');

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    'post-logout-redirect-uri': { type: 'string', multiple: true },
    users: { type: 'string' },
  },
});

const list = (s) => (s ?? '').split(/[\s,]+/).filter(Boolean);
const port = Number(args.port ?? process.env.OP_PORT ?? 0);
const redirectUris = args['redirect-uri'] ?? list(process.env.OP_REDIRECT_URIS);
if (redirectUris.length === 0) {
  console.error('op.mjs: no redirect URI (--redirect-uri or OP_REDIRECT_URIS)');
  process.exit(2);
}
const postLogoutRedirectUris = args['post-logout-redirect-uri']
  ?? (process.env.OP_POST_LOGOUT_REDIRECT_URIS !== undefined
    ? list(process.env.OP_POST_LOGOUT_REDIRECT_URIS)
    : [...new Set(redirectUris.map((u) => `${new URL(u).origin}/`))]);
const users = JSON.parse(args.users ?? process.env.OP_USERS ?? '{}');

// Exit with the parent: its end of our stdin closes when it exits, however.
process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));

// Listen first, so that port 0 works: the issuer needs the port.
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test', alg: 'RS256', use: 'sig' };

const autoSubmit = (form) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Signing out</title></head>
<body>${form}<script>document.forms[0].submit()</script></body></html>`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'partita',
    client_secret: 'partita-test-secret',
    token_endpoint_auth_method: 'client_secret_basic',
    redirect_uris: redirectUris,
    post_logout_redirect_uris: postLogoutRedirectUris,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
  }],
  jwks: { keys: [signingKey] },
  responseTypes: ['code'],
  pkce: { required: () => true }, // S256 only (the library's default methods)
  // Each key is a scope, with the claims it grants.
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  conformIdTokenClaims: false, // the scopes' claims in the ID token too
  findAccount: async (ctx, sub) => ({
    accountId: sub,
    claims: async () => ({
      sub,
      email: `${sub}@example.test`,
      email_verified: true,
      name: sub.charAt(0).toUpperCase() + sub.slice(1),
      groups: Array.isArray(users[sub]) ? users[sub] : [],
    }),
  }),
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      // The confirmation form, answered "yes" at once.
      logoutSource: async (ctx, form) => {
        ctx.body = autoSubmit(form.replace('</form>', '<input type="hidden" name="logout" value="yes"/></form>'));
      },
      postLogoutSuccessSource: async (ctx) => {
        ctx.body = '<!DOCTYPE html><html><head><title>Signed out</title></head><body><p id="op-signed-out">Signed out.</p></body></html>';
      },
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  // Not `_session`: cookies do not tell ports apart, and the app under
  // test runs on 127.0.0.1 as well.
  cookies: {
    keys: ['partita-test-op'],
    names: { session: 'op_session', interaction: 'op_interaction', resume: 'op_interaction_resume' },
  },
  clientBasedCORS: () => true,
  renderError: async (ctx, out) => {
    ctx.type = 'html';
    ctx.body = `<!DOCTYPE html><html><head><title>OP error</title></head><body><pre id="op-error">${
      Object.entries(out).map(([k, v]) => `${k}: ${String(v).replace(/[<>&]/g, '')}`).join('\n')
    }</pre></body></html>`;
  },
});

// Auto-login (the `login_hint`, default alice) and auto-consent.
provider.use(async (ctx, next) => {
  if (!/^\/interaction\/[^/]+$/.test(ctx.path)) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session, grantId } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: String(params.login_hint || 'alice') } };
  } else if (prompt.name === 'consent') {
    const grant = grantId
      ? await provider.Grant.find(grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    for (const [indicator, scope] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scope.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  } else {
    ctx.throw(501, `prompt ${prompt.name} not handled`);
  }
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, {
    mergeWithLastSubmission: prompt.name !== 'login',
  });
  ctx.redirect(returnTo);
});

server.on('request', provider.callback());
console.log(`OP ready ${issuer}`);
