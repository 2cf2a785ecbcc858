// A real OpenID provider for the single sign-on tests: panva's oidc-provider (certified by the
// OpenID Foundation) with its development login and consent pages, serving one client.
//
//   node oidc-provider.mjs --fd N --issuer URL --redirect-uri URI --accounts FILE
//
// It listens on the socket it is given (file descriptor N, bound by the test on 127.0.0.1),
// so its port is known before it starts. FILE is a JSON object of accounts by login: each the
// claims the provider tells of that person (email, email_verified, name, roles...); it is read
// anew at each look-up, so a test changes a person's roles by rewriting it. The client is
// "parley" with the secret "parley-secret", PKCE (S256) required. A JSON line is printed once
// it listens.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

const { values } = parseArgs({
  options: {
    fd: { type: 'string' },
    issuer: { type: 'string' },
    'redirect-uri': { type: 'string' },
    accounts: { type: 'string' },
  },
});

const readAccounts = () => JSON.parse(readFileSync(values.accounts, 'utf8'));

const provider = new Provider(values.issuer, {
  clients: [{
    client_id: 'parley',
    client_secret: 'parley-secret',
    redirect_uris: [values['redirect-uri']],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'roles'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username'],
    roles: ['roles'],
  },
  async findAccount(ctx, id) {
    const claims = readAccounts()[id];
    if (!claims) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
  },
  cookies: { keys: ['parley-tests-only'] },
  features: { devInteractions: { enabled: true } },
});
// The development pages' warnings are expected here; say nothing of them.
provider.on('server_error', (ctx, error) => console.error('server_error', error));

const server = http.createServer(provider.callback());
server.listen({ fd: Number(values.fd) }, () => {
  console.log(JSON.stringify({ listening: values.issuer }));
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
