/**
 * etcd, kube-apiserver and kube-controller-manager, as a real cluster runs them: RBAC, the
 * default admission plugins with ServiceAccount and PodSecurity on (and the admission policy
 * and webhook plugins named, so the intent reads in the flags), service-account signing keys,
 * the controllers acting with their own service-account credentials. No scheduler: pods stay
 * Pending unless a node of the world runs them (real-node.ts, node.ts). Flags are the ones
 * Kubernetes' own local-up-cluster.sh and envtest pass, minus envtest's
 * `--disable-admission-plugins=ServiceAccount`; before 1.36, where MutatingAdmissionPolicy is a
 * beta that is off by default, its feature gate and API are turned on, as a provider may, so that
 * the export is proved there too.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { Kube } from './kube.js';
import { addresses } from './network.js';
import type { Pki } from './pki.js';
import { startProcess, waitUntil, type Managed } from './processes.js';

export const apiServerUrl = 'https://127.0.0.1:6443';

/** The admission plugins the API server runs (the order is the API server's own, whatever the flag's). */
export const admissionPlugins = [
  'NamespaceLifecycle',
  'LimitRanger',
  'ServiceAccount',
  'PodSecurity',
  'Priority',
  'DefaultTolerationSeconds',
  'ResourceQuota',
  'MutatingAdmissionPolicy',
  'MutatingAdmissionWebhook',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionWebhook',
];

export interface ControlPlane {
  readonly etcd: Managed;
  readonly apiServer: Managed;
  readonly controllerManager: Managed;
  /** Milliseconds from the first exec to: etcd ready, API server ready, the `default` ServiceAccount made. */
  readonly startTimes: { readonly etcdMs: number; readonly apiServerMs: number; readonly controllersMs: number };
  stop(): Promise<void>;
}

const etcdReady = () =>
  new Promise<boolean>((resolve) => {
    http
      .get('http://127.0.0.1:2379/readyz', (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      })
      .on('error', () => resolve(false));
  });

export async function startControlPlane(bin: string, state: string, pki: Pki): Promise<ControlPlane> {
  const started: Managed[] = [];
  const stop = async () => {
    // The reverse order: an API server whose etcd is gone can hang in its shutdown.
    for (const p of [...started].reverse()) await p.stop();
  };
  const t0 = performance.now();
  const version = execFileSync(join(bin, 'kube-apiserver'), ['--version'], { encoding: 'utf8' });
  const minor = Number(/^Kubernetes v1\.(\d+)\./.exec(version)?.[1]);
  if (!Number.isInteger(minor)) throw new Error(`kube-apiserver --version says ${JSON.stringify(version.slice(0, 80))}`);
  const mutatingPolicyBeta = minor < 36 ? ['--feature-gates=MutatingAdmissionPolicy=true', '--runtime-config=admissionregistration.k8s.io/v1beta1=true'] : [];
  try {
    const etcd = startProcess(
      'etcd',
      join(bin, 'etcd'),
      [
        `--data-dir=${join(state, 'etcd')}`,
        '--listen-client-urls=http://127.0.0.1:2379',
        '--advertise-client-urls=http://127.0.0.1:2379',
        '--listen-peer-urls=http://127.0.0.1:2380',
        '--unsafe-no-fsync=true',
        '--quota-backend-bytes=8589934592',
        '--log-level=warn',
      ],
      join(state, 'etcd.log'),
    );
    started.push(etcd);
    await waitUntil('etcd /readyz', etcdReady, { alive: etcd });
    const etcdMs = performance.now() - t0;

    // The audit log says what the API server did with each request of the injector and each pod
    // create (who asked, the answer's code, which webhooks patched in which round): tests read it.
    const auditPolicy = join(state, 'audit-policy.yaml');
    writeFileSync(
      auditPolicy,
      [
        'apiVersion: audit.k8s.io/v1',
        'kind: Policy',
        'omitStages: [RequestReceived]',
        'rules:',
        '  - level: Metadata',
        '    userGroups: ["system:serviceaccounts:sidecar-injector"]',
        '  - level: Metadata',
        '    verbs: [create]',
        '    resources: [{group: "", resources: ["pods"]}]',
        '  - level: None',
        '',
      ].join('\n'),
    );
    // The client certificate the API server presents to every webhook in the injector's namespace
    // (AdmissionConfiguration → WebhookAdmission kubeConfigFile), as a provider configures it; the
    // injector asks for it only when an install gives it --client-ca.
    const webhookKubeconfig = join(state, 'webhook-client.kubeconfig');
    writeFileSync(
      webhookKubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'users:',
        '  - name: "*.sidecar-injector.svc"',
        `    user: {client-certificate: "${pki.webhookClient.cert}", client-key: "${pki.webhookClient.key}"}`,
        '',
      ].join('\n'),
    );
    const admissionConfiguration = join(state, 'admission-configuration.yaml');
    writeFileSync(
      admissionConfiguration,
      [
        'apiVersion: apiserver.config.k8s.io/v1',
        'kind: AdmissionConfiguration',
        'plugins:',
        ...['MutatingAdmissionWebhook', 'ValidatingAdmissionWebhook'].flatMap((name) => [
          `  - name: ${name}`,
          '    configuration:',
          '      apiVersion: apiserver.config.k8s.io/v1',
          '      kind: WebhookAdmissionConfiguration',
          `      kubeConfigFile: "${webhookKubeconfig}"`,
        ]),
        '',
      ].join('\n'),
    );
    const apiServer = startProcess(
      'kube-apiserver',
      join(bin, 'kube-apiserver'),
      [
        '--etcd-servers=http://127.0.0.1:2379',
        '--bind-address=0.0.0.0',
        '--secure-port=6443',
        `--advertise-address=${addresses.advertise}`,
        `--tls-cert-file=${pki.serverCert}`,
        `--tls-private-key-file=${pki.serverKey}`,
        `--client-ca-file=${pki.caFile}`,
        `--token-auth-file=${pki.tokensFile}`,
        '--service-account-issuer=https://kubernetes.default.svc',
        `--service-account-key-file=${pki.serviceAccountKey}`,
        `--service-account-signing-key-file=${pki.serviceAccountKey}`,
        '--authorization-mode=RBAC',
        `--enable-admission-plugins=${admissionPlugins.join(',')}`,
        `--admission-control-config-file=${admissionConfiguration}`,
        `--service-cluster-ip-range=${addresses.serviceCidr}`,
        '--allow-privileged=true',
        // The real node's kubelet by the address it reports, not its name (nothing resolves it here).
        '--kubelet-preferred-address-types=InternalIP',
        '--profiling=false',
        ...mutatingPolicyBeta,
        `--audit-policy-file=${auditPolicy}`,
        `--audit-log-path=${join(state, 'audit.log')}`,
        '--audit-log-maxsize=0',
        // Keep the API server's own log readable on failure; --v=1 is what local-up-cluster uses.
        '--v=1',
      ],
      join(state, 'kube-apiserver.log'),
    );
    started.push(apiServer);
    const admin = new Kube({ server: apiServerUrl, ca: pki.ca, token: pki.admin.token });
    try {
      // A busy 2-core machine can take 30 s and more: 1,200 checks of at least 100 ms.
      await waitUntil('kube-apiserver /readyz', async () => (await admin.request('GET', '/readyz')).status === 200, { checks: 1200, alive: apiServer });
      const apiServerMs = performance.now() - t0;

      const controllerManager = startProcess(
        'kube-controller-manager',
        join(bin, 'kube-controller-manager'),
        [
          `--kubeconfig=${pki.controllerManager.kubeconfig}`,
          `--authentication-kubeconfig=${pki.controllerManager.kubeconfig}`,
          `--authorization-kubeconfig=${pki.controllerManager.kubeconfig}`,
          '--use-service-account-credentials=true',
          `--service-account-private-key-file=${pki.serviceAccountKey}`,
          `--root-ca-file=${pki.caFile}`,
          `--service-cluster-ip-range=${addresses.serviceCidr}`,
          '--controllers=*',
          '--leader-elect=false',
          '--bind-address=127.0.0.1',
          '--secure-port=10257',
          '--v=1',
        ],
        join(state, 'kube-controller-manager.log'),
      );
      started.push(controllerManager);
      // The ServiceAccount controller has made the default namespace's `default` account: the
      // controllers are running (a pod created before its namespace has one is refused).
      await waitUntil('the default ServiceAccount', async () => (await admin.find('/api/v1/namespaces/default/serviceaccounts/default')) !== undefined, {
        checks: 1200,
        alive: controllerManager,
      });
      const controllersMs = performance.now() - t0;
      return { etcd, apiServer, controllerManager, startTimes: { etcdMs, apiServerMs, controllersMs }, stop };
    } finally {
      admin.close();
    }
  } catch (err) {
    await stop();
    throw err;
  }
}
