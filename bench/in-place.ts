/**
 * What an in-place update saves, on the real node (run inside the test cluster:
 * `scripts/cluster.sh run -- node dist/bench/in-place.js`, or `npm run bench:in-place`): with the
 * in-place overlay installed, `--deployments` Deployments of `--replicas` pods each carry a
 * template's sidecar; then
 * - **in place**: a candidate at share 100 that only changes the sidecar's image is stored, and
 *   the time until every pod runs the new image and is ready is taken (no pod is recreated:
 *   checked by uid);
 * - **restart**: the same Deployments are restarted (`kubectl rollout restart`, a rolling update
 *   of at most 25 % unavailable and no surge: the one node holds 110 pods), and the time until
 *   every pod is a new one, ready, is taken.
 * Both from the write to the last pod ready, as the API server reports them.
 *
 * Options: --deployments N (default 10), --replicas N (default 10), --max-unavailable N|N% (the
 * template's inPlaceMaxUnavailable, default 1), --max-unsettled N (serve's
 * --in-place-max-unsettled, default 5).
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import {
  deployOverlay,
  eventually,
  everyReplica,
  joinWorld,
  realNodeDeployments,
  sidecarTemplate,
  restoreShipped,
  sidecarTemplatesPath,
  testNamespaceName,
  waitingSidecarSpec,
  type Json,
} from '../test/cluster/helpers.js';

const { values } = parseArgs({
  options: {
    deployments: { type: 'string', default: '10' },
    replicas: { type: 'string', default: '10' },
    'max-unavailable': { type: 'string' },
    'max-unsettled': { type: 'string' },
  },
});
const deployments = Number(values.deployments);
const replicas = Number(values.replicas);
const maxUnavailable =
  values['max-unavailable'] === undefined ? undefined : /^\d+$/.test(values['max-unavailable']) ? Number(values['max-unavailable']) : values['max-unavailable'];
const maxUnsettled = values['max-unsettled'];
if (maxUnsettled !== undefined && !/^\d+$/.test(maxUnsettled)) throw new Error(`--max-unsettled: a whole number (got ${maxUnsettled})`);
const world = joinWorld();
const { kube, kubectl } = world;
const node = world.file.realNode!;
const name = 'bench-in-place';
/** Each wait's checks (50 ms apart, plus the list): up to about half an hour. */
const waitChecks = 36_000;

/**
 * The bench's template: one native sidecar of `image`, updated in place, that only sleeps: no
 * loop and no exec probe (a hundred of those, each a runc exec a second, are what two cores
 * would measure), so ready once it runs.
 */
function spec(image: string): Json {
  const template = waitingSidecarSpec(name, image, {
    updateStrategy: 'inPlace',
    ...(maxUnavailable !== undefined ? { inPlaceMaxUnavailable: maxUnavailable } : {}),
  });
  const { readinessProbe: _probe, ...sidecar } = (template.initContainers as Json[])[0]!;
  return {
    ...template,
    initContainers: [{ ...sidecar, command: ['sleep', '36000'], resources: { requests: { cpu: '1m', memory: '4Mi' }, limits: { memory: '16Mi' } } }],
  };
}

const ready = (pod: Json) => (pod.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
const sidecarImage = (pod: Json) => ((pod.status?.initContainerStatuses ?? []) as Json[]).find((c) => c.name === name)?.image as string | undefined;

async function pods(namespace: string): Promise<Json[]> {
  // Pods the kubelet refused (Failed, OutOfpods: a restart briefly holds more pods than the node takes) are no replica.
  return ((await kube.get(`/api/v1/namespaces/${namespace}/pods`)).items as Json[]).filter(
    (p) => !p.metadata.deletionTimestamp && p.status?.phase !== 'Failed',
  );
}

/** The in-place overlay, with serve's --in-place-max-unsettled when one is given (an overlay of it under build/). */
async function overlay(): Promise<string> {
  if (maxUnsettled === undefined) return 'test/cluster/overlays/in-place';
  const dir = 'build/bench-in-place-overlay';
  await mkdir(dir, { recursive: true });
  await writeFile(
    `${dir}/kustomization.yaml`,
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: ['../../test/cluster/overlays/in-place'],
      patches: [
        {
          target: { kind: 'Deployment', name: 'sidecar-injector' },
          patch: stringify([{ op: 'add', path: '/spec/template/spec/containers/0/args/-', value: `--in-place-max-unsettled=${maxUnsettled}` }]),
        },
      ],
    }),
  );
  return dir;
}

async function main(): Promise<void> {
  const kustomization = await overlay();
  await deployOverlay(kustomization, maxUnsettled === undefined ? '--in-place-updates=on' : `--in-place-max-unsettled=${maxUnsettled}`);
  const namespace = testNamespaceName('bench-in-place');
  await kube.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: namespace, labels: { 'sidecar-injector.io/injection': 'enabled', 'sidecar-injector.io/in-place-updates': 'enabled' } },
  });
  await eventually('the default ServiceAccount', () => kube.find(`/api/v1/namespaces/${namespace}/serviceaccounts/default`));
  await kube.create(sidecarTemplatesPath(), sidecarTemplate(stringify({ name, ...spec(node.image) })));
  try {
    // Every replica serving the stable revision before any pod is created.
    await everyReplica((status) => (status.templates.templates as string[]).some((t) => t.startsWith(`${name}@`)), 'every replica serving the template');
    // No surge: the one node runs at most 110 pods, and a 25 % surge of 100 would not fit (the kubelet
    // refuses the pods past it, OutOfpods, and the controllers make more).
    await realNodeDeployments(
      namespace,
      name,
      deployments,
      replicas,
      { resources: { requests: { cpu: '1m', memory: '4Mi' }, limits: { memory: '16Mi' } } },
      { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '25%' } } },
    );
    const total = deployments * replicas;
    const before = await eventually(
      `${total} pods ready with the stable sidecar`,
      async () => {
        const all = await pods(namespace);
        return all.length === total && all.every((p) => ready(p) && sidecarImage(p) === node.image) ? all : undefined;
      },
      waitChecks,
    );

    let started = Date.now();
    await kube.create(sidecarTemplatesPath(), {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name: `${name}-next` },
      spec: { ...spec(node.pulledImage), name, rollout: { role: 'candidate', share: 100 } },
    });
    const inPlace = await eventually(
      `${total} pods ready with the new image, in place`,
      async () => {
        const all = await pods(namespace);
        return all.length === total && all.every((p) => ready(p) && sidecarImage(p) === node.pulledImage) ? all : undefined;
      },
      waitChecks,
    );
    const inPlaceMs = Date.now() - started;
    const uids = new Set(before.map((p) => p.metadata.uid));
    const recreated = inPlace.filter((p) => !uids.has(p.metadata.uid)).length;
    process.stdout.write(
      `${JSON.stringify({ deployments, replicas, pods: total, maxUnavailable: maxUnavailable ?? 1, maxUnsettled: Number(maxUnsettled ?? 5), inPlaceMs, podsRecreatedInPlace: recreated })}\n`,
    );

    started = Date.now();
    await kubectl(['-n', namespace, 'rollout', 'restart', ...Array.from({ length: deployments }, (_, i) => `deployment/web-${i}`)]);
    const inPlaceUids = new Set(inPlace.map((p) => p.metadata.uid));
    await eventually(
      `${total} new pods ready after the restart`,
      async () => {
        const all = await pods(namespace);
        return all.length === total && all.every((p) => ready(p) && !inPlaceUids.has(p.metadata.uid)) ? all : undefined;
      },
      waitChecks,
    );
    const restartMs = Date.now() - started;
    process.stdout.write(
      `${JSON.stringify({ deployments, replicas, pods: total, restartMs, restartOverInPlace: Number((restartMs / inPlaceMs).toFixed(2)) })}\n`,
    );
  } finally {
    await kube.delete(sidecarTemplatesPath(`${name}-next`));
    await kube.delete(sidecarTemplatesPath(name));
    await kube.delete(`/api/v1/namespaces/${namespace}`);
    await restoreShipped('--in-place-updates');
    if (maxUnsettled !== undefined) await rm(kustomization, { recursive: true, force: true });
  }
}

await main();
