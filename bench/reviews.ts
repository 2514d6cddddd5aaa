/**
 * Realistic AdmissionReviews of three sizes, as the API server sends them after defaulting and
 * the ServiceAccount plugin (CONTRACT.md ): small (~1 KB), typical (~5.5 KB: two
 * containers, probes, env, volumes) and large (~60 KB: 1,000 env vars).
 */
import { createReview, prepareCreate } from '../test/helpers/apiserver.js';

export type PodSize = 'small' | 'typical' | 'large';

function probe(path: string, port: number) {
  return { httpGet: { path, port }, initialDelaySeconds: 5 };
}

/** A Deployment pod body before admission, with `envCount` env vars on the app container. */
export function podBody(size: PodSize, envCount?: number): Record<string, any> {
  if (size === 'small') {
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'web-6d4cf56db6-', labels: { app: 'web', 'pod-template-hash': '6d4cf56db6' } },
      spec: { containers: [{ name: 'web', image: 'nginx:1.27', ports: [{ containerPort: 80 }] }] },
    };
  }
  const count = envCount ?? (size === 'large' ? 1000 : 12);
  const env = Array.from({ length: count }, (_, i) => ({ name: `SETTING_${i}`, value: `value-${i}-${'x'.repeat(size === 'large' ? 8 : 10)}` }));
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'checkout-7f9b8c6d5-',
      labels: { app: 'checkout', 'app.kubernetes.io/name': 'checkout', 'app.kubernetes.io/part-of': 'shop', 'pod-template-hash': '7f9b8c6d5' },
      annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090', 'kubectl.kubernetes.io/restartedAt': '2026-11-01T10:00:00Z' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'checkout-7f9b8c6d5',
          uid: '3b2a1c0d-1111-2222-3333-444455556666',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      containers: [
        {
          name: 'checkout',
          image: 'registry.example.com/shop/checkout:2.14.3',
          args: ['--port=8080', '--metrics-port=9090', '--log-format=json'],
          ports: [
            { name: 'http', containerPort: 8080 },
            { name: 'metrics', containerPort: 9090 },
          ],
          env: [
            ...env,
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
            { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'checkout-db', key: 'password' } } },
          ],
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '512Mi' } },
          livenessProbe: probe('/healthz', 8080),
          readinessProbe: probe('/ready', 8080),
          volumeMounts: [
            { name: 'config', mountPath: '/etc/checkout' },
            { name: 'cache', mountPath: '/var/cache/checkout' },
          ],
          securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
        },
        {
          name: 'metrics-exporter',
          image: 'registry.example.com/shop/exporter:1.3.0',
          ports: [{ name: 'exporter', containerPort: 9100 }],
          env: [{ name: 'TARGET', value: 'http://127.0.0.1:9090/metrics' }],
          resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } },
          readinessProbe: probe('/', 9100),
        },
      ],
      volumes: [
        { name: 'config', configMap: { name: 'checkout-config' } },
        { name: 'cache', emptyDir: { sizeLimit: '1Gi' } },
      ],
      affinity: {
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'checkout' } } } },
          ],
        },
      },
      nodeSelector: { 'kubernetes.io/os': 'linux' },
    },
  };
}

/**
 * The AdmissionReview JSON text for one pod size; `managedAt` is when the controller wrote the
 * pod (its managedFields time), what pods of one ReplicaSet differ in.
 */
export function reviewText(
  size: PodSize,
  options: { envCount?: number; requestProxy?: boolean; uid?: string; annotations?: Readonly<Record<string, string>>; managedAt?: string } = {},
): string {
  const pod = prepareCreate(podBody(size, options.envCount), 'shop', options.managedAt ? { managedAt: options.managedAt } : {});
  if (options.requestProxy ?? true) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
  if (options.annotations) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), ...options.annotations };
  return JSON.stringify(createReview(pod, { namespace: 'shop', uid: options.uid ?? '11111111-2222-3333-4444-555555555555' }));
}

/** Pods of one ReplicaSet as they arrive: `count` reviews of the same pod written by its controller a second apart. */
export function replicaSetReviews(size: PodSize, uid: string, count = 60): string[] {
  return Array.from({ length: count }, (_, s) =>
    reviewText(size, { uid, managedAt: `2026-11-24T10:${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}Z` }),
  );
}
