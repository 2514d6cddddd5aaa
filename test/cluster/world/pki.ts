/**
 * The control plane's keys and identities, made fresh for every world with openssl: a CA, the
 * API server's serving certificate (its loopback, advertise and `kubernetes` Service names), the
 * service-account signing key, and static tokens for the identities the tests and the
 * controller manager use. The injector gets none of these: it runs with a token the API server
 * issues for its own ServiceAccount.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { addresses } from './network.js';

export interface Identity {
  readonly user: string;
  readonly token: string;
  readonly kubeconfig: string;
}

export interface Pki {
  readonly dir: string;
  readonly caFile: string;
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly serviceAccountKey: string;
  readonly tokensFile: string;
  /** In `system:masters`: what the tests act as. */
  readonly admin: Identity;
  /** `system:kube-controller-manager`, bound by the API server's bootstrap RBAC. */
  readonly controllerManager: Identity;
  /** A user with no role at all: what the RBAC tests ask as. */
  readonly nobody: Identity;
  /**
   * The client certificate kube-apiserver presents to webhooks (its WebhookAdmission
   * kubeConfigFile), from a CA of its own, as a provider's control plane would have it: the CA is
   * what `serve --client-ca` is given.
   */
  readonly webhookClient: { readonly caFile: string; readonly cert: string; readonly key: string };
}

const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** A kubeconfig with a bearer token, as kubectl and @kubernetes/client-node read it. */
export function writeKubeconfig(file: string, server: string, caFile: string, user: string, token: string): void {
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '  - name: test',
      `    cluster: {server: "${server}", certificate-authority: "${caFile}"}`,
      'users:',
      `  - name: ${JSON.stringify(user)}`,
      `    user: {token: "${token}"}`,
      'contexts:',
      '  - name: test',
      `    context: {cluster: test, user: ${JSON.stringify(user)}}`,
      'current-context: test',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
}

export function createPki(dir: string, server: string): Pki {
  mkdirSync(dir, { recursive: true });
  const file = (name: string) => join(dir, name);
  openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '3'].concat([
      '-subj',
      '/CN=sidecar-injector-test-cluster-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]),
  );
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('apiserver.key'), '-out', file('apiserver.csr'), '-subj', '/CN=kube-apiserver']);
  const names = ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'];
  const ips = ['127.0.0.1', addresses.advertise, addresses.kubernetesService];
  writeFileSync(
    file('apiserver.ext'),
    [
      `subjectAltName=${[...names.map((n) => `DNS:${n}`), ...ips.map((ip) => `IP:${ip}`)].join(',')}`,
      'extendedKeyUsage=serverAuth',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      '',
    ].join('\n'),
  );
  openssl(
    ['x509', '-req', '-in', file('apiserver.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '3'].concat([
      '-out',
      file('apiserver.crt'),
      '-extfile',
      file('apiserver.ext'),
    ]),
  );
  openssl(['genrsa', '-out', file('sa.key'), '2048']);
  openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('webhook-client-ca.key'), '-out', file('webhook-client-ca.crt'), '-days', '3'].concat([
      '-subj',
      '/CN=sidecar-injector-test-webhook-client-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]),
  );
  openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    file('webhook-client.key'),
    '-out',
    file('webhook-client.csr'),
    '-subj',
    '/CN=kube-apiserver-webhook-client',
  ]);
  writeFileSync(file('webhook-client.ext'), 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n');
  openssl(
    [
      'x509',
      '-req',
      '-in',
      file('webhook-client.csr'),
      '-CA',
      file('webhook-client-ca.crt'),
      '-CAkey',
      file('webhook-client-ca.key'),
      '-CAcreateserial',
    ].concat(['-days', '3', '-out', file('webhook-client.crt'), '-extfile', file('webhook-client.ext')]),
  );
  const token = () => randomBytes(24).toString('hex');
  const identity = (name: string, user: string): Identity => {
    const kubeconfig = file(`${name}.kubeconfig`);
    const t = token();
    writeKubeconfig(kubeconfig, server, file('ca.crt'), user, t);
    return { user, token: t, kubeconfig };
  };
  const admin = identity('admin', 'test-admin');
  const controllerManager = identity('controller-manager', 'system:kube-controller-manager');
  const nobody = identity('nobody', 'test-nobody');
  // token,user,uid,"groups"
  writeFileSync(
    file('tokens.csv'),
    [
      `${admin.token},${admin.user},uid-admin,"system:masters"`,
      `${controllerManager.token},${controllerManager.user},uid-kcm`,
      `${nobody.token},${nobody.user},uid-nobody`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return {
    dir,
    caFile: file('ca.crt'),
    ca: readFileSync(file('ca.crt'), 'utf8'),
    serverCert: file('apiserver.crt'),
    serverKey: file('apiserver.key'),
    serviceAccountKey: file('sa.key'),
    tokensFile: file('tokens.csv'),
    admin,
    controllerManager,
    nobody,
    webhookClient: { caFile: file('webhook-client-ca.crt'), cert: file('webhook-client.crt'), key: file('webhook-client.key') },
  };
}
