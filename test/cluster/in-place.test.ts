/**
 * In-place updates on the real node, with the rollout-preflight and in-place-updates components
 * applied as an overlay: a candidate that differs only in its sidecar's image reaches the
 * running pods of Deployments without a new pod (the same uid, the app container never
 * restarted, the sidecar restarted by the kubelet with the new image); a candidate whose image
 * cannot be pulled is halted by its pods' health and taken back in place; a candidate that differs
 * only in its sidecar's resources reaches them through pods/resize, into the kubelet's cgroups,
 * with no container restarted; the generated ValidatingAdmissionPolicy refuses every other change
 * the injector's ServiceAccount tries.
 */
import test, { type ExecutionContext } from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  cli,
  deployOverlay,
  eventually,
  joinWorld,
  optedInNamespace,
  realNodeDeployments,
  restoreShipped,
  sidecarTemplatesPath,
  someReplica,
  waitingSidecarSpec,
  withTemplate,
  type Json,
} from './helpers.js';

const realNode = () => joinWorld().file.realNode!;
const injectorAccount = 'system:serviceaccount:sidecar-injector:sidecar-injector';

/** The test's template: one native sidecar of `image` that waits until stopped, updated in place. */
const sidecarSpec = (name: string, image: string): Json => waitingSidecarSpec(name, image, { updateStrategy: 'inPlace' });

/** The test's template with its sidecar's `resources`. */
const withResources = (name: string, resources: Json): Json => {
  const spec = sidecarSpec(name, realNode().image);
  (spec.initContainers as Json[])[0]!.resources = resources;
  return spec;
};

/** Requests and limits alike, whatever order the kubelet reports their keys in. */
const sameResources = (a: Json | undefined, b: Json) =>
  a !== undefined &&
  (['requests', 'limits'] as const).every(
    (list) => JSON.stringify(a[list] ?? {}, Object.keys(b[list] ?? {}).sort()) === JSON.stringify(b[list] ?? {}, Object.keys(b[list] ?? {}).sort()),
  );

/** A cgroup file of the container `containerID` of a Burstable pod, under the kubelet's root in `controller`'s hierarchy. */
function cgroupValue(controller: 'memory' | 'cpu', pod: Json, containerID: string, file: string): number {
  const id = containerID.replace(/^containerd:\/\//, '');
  const hierarchies = controller === 'memory' ? ['memory'] : ['cpu', 'cpu,cpuacct'];
  for (const hierarchy of hierarchies) {
    const path = join('/sys/fs/cgroup', hierarchy, realNode().cgroupRoot, 'kubepods', 'burstable', `pod${pod.metadata.uid}`, id, file);
    if (existsSync(path)) return Number(readFileSync(path, 'utf8'));
  }
  throw new Error(`no ${file} for container ${id} of ${pod.metadata.name}`);
}

/** Stores the stable revision for the test (every replica serving it), and returns the candidate's writer. */
async function stableTemplate(t: ExecutionContext, name: string): Promise<(image: string) => Promise<void>> {
  const { kube } = joinWorld();
  await withTemplate(t, name, stringify({ name, ...sidecarSpec(name, realNode().image) }));
  const path = sidecarTemplatesPath(`${name}-next`);
  t.teardown(() => kube.delete(path));
  return async (image) => {
    await kube.create(sidecarTemplatesPath(), {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name: `${name}-next` },
      spec: { ...sidecarSpec(name, image), name, rollout: { role: 'candidate', share: 100 } },
    });
  };
}

const sidecarOf = (pod: Json, name: string) => ({
  spec: ((pod.spec.initContainers ?? []) as Json[]).find((c) => c.name === name),
  status: ((pod.status?.initContainerStatuses ?? []) as Json[]).find((c) => c.name === name),
});
const appStatus = (pod: Json) => ((pod.status?.containerStatuses ?? []) as Json[]).find((c) => c.name === 'app');
const ledgerRevision = (pod: Json, name: string) =>
  JSON.parse(pod.metadata.annotations['sidecar-injector.io/status']).templates[name]?.hash as string | undefined;

/** The namespace's pods once `holds` is true of every one of the `count` not being deleted. */
async function podsWhen(namespace: string, count: number, what: string, holds: (pod: Json) => boolean): Promise<Json[]> {
  const { kube } = joinWorld();
  return eventually(what, async () => {
    const pods = ((await kube.get(`/api/v1/namespaces/${namespace}/pods`)).items as Json[]).filter((p) => !p.metadata.deletionTimestamp);
    return pods.length === count && pods.every(holds) ? pods : undefined;
  });
}

/** Ready with `image` in the sidecar `name`, as the kubelet reports it. */
const runs = (name: string, image: string) => (pod: Json) => {
  const { spec, status } = sidecarOf(pod, name);
  return spec?.image === image && status?.image === image && status?.ready === true && appStatus(pod)?.ready === true;
};

test.before(() => deployOverlay('test/cluster/overlays/in-place', '--in-place-updates=on'));
test.after.always(() => restoreShipped('--in-place-updates'));

test.serial(
  'a new sidecar image reaches the running pods in place: the same pods, the app never restarted, the sidecar restarted by the kubelet with the new image',
  async (t) => {
    const { kube } = joinWorld();
    const name = `rn-inplace-${Math.random().toString(36).slice(2, 7)}`;
    const namespace = await optedInNamespace(t, 'in-place', { 'sidecar-injector.io/in-place-updates': 'enabled' });
    const putCandidate = await stableTemplate(t, name);
    await realNodeDeployments(namespace, name, 2, 2);
    const before = await podsWhen(namespace, 4, 'the 4 pods running with the stable sidecar', runs(name, realNode().image));
    const started = Date.now();
    await putCandidate(realNode().pulledImage);
    // While it runs: the candidate's status says how far the in-place rollout is, and rollout status shows it.
    const during = await eventually('the candidate’s in-place progress in its status', async () => {
      const s = (await kube.get(sidecarTemplatesPath(`${name}-next`))).status ?? {};
      return s.inPlace && s.inPlace.updated >= 1 ? s : undefined;
    });
    const shownDuring = await cli(['rollout', 'status', '-n', namespace], { cwd: tmpdir() });
    t.is(shownDuring.code, 0, shownDuring.stderr);
    t.log(`rollout status -n ${namespace} during the in-place rollout:\n${shownDuring.stdout}`);
    t.regex(shownDuring.stdout, new RegExp(`^${name}-next +${during.revision} +\\d+ +\\d+ +\\d+ +0 +0 +0 +\\S+$`, 'm'));
    const after = await podsWhen(namespace, 4, 'the 4 pods running the candidate’s image in place', runs(name, realNode().pulledImage));
    t.log(`4 pods of 2 Deployments updated in place in ${Date.now() - started} ms (candidate stored → every sidecar ready with the new image)`);
    const byUid = new Map(before.map((p) => [p.metadata.uid, p]));
    const candidate = (await kube.get(sidecarTemplatesPath(`${name}-next`))).status?.revision;
    for (const pod of after) {
      const was = byUid.get(pod.metadata.uid);
      t.truthy(was, `${pod.metadata.name}: the same pod (uid ${pod.metadata.uid})`);
      t.is(appStatus(pod)!.restartCount, appStatus(was!)!.restartCount, `${pod.metadata.name}: the app container was not restarted`);
      t.is(appStatus(pod)!.containerID, appStatus(was!)!.containerID, `${pod.metadata.name}: the app container is the same container`);
      t.true(sidecarOf(pod, name).status!.restartCount > sidecarOf(was!, name).status!.restartCount, `${pod.metadata.name}: the kubelet restarted the sidecar`);
      t.regex(String(sidecarOf(pod, name).status!.imageID), /@sha256:[0-9a-f]{64}$/, 'pulled from the registry');
      t.is(ledgerRevision(pod, name), candidate, 'the ledger records the candidate’s revision');
    }
    // The status comes to say every pod was given it in place, none pending.
    await eventually('the candidate’s status: 4 updated in place, none pending', async () => {
      const s = (await kube.get(sidecarTemplatesPath(`${name}-next`))).status ?? {};
      return s.inPlace?.updated === 4 && s.inPlace?.pending === 0 && s.inPlace?.recreateNeeded === 0;
    });
    // The leader says what it did; the audit calls every pod current.
    const status = await someReplica((s) => (s['in-place-updates']?.inPlaceUpdated ?? 0) >= 4, 'the leader’s count of pods updated in place');
    t.like(status['in-place-updates'].lastRound, { refused: 0, failed: 0 });
    const audit = await cli(['audit', '-n', namespace, '-o', 'json'], { cwd: tmpdir() });
    t.is(audit.code, 0, audit.stderr);
    t.deepEqual(
      (JSON.parse(audit.stdout).pods as Json[]).map((p) => p.state),
      ['current', 'current', 'current', 'current'],
    );
  },
);

test.serial(
  'a candidate whose image cannot be pulled is halted by its pods’ health and taken back in place: the same pods run the stable image again',
  async (t) => {
    const { kube } = joinWorld();
    const name = `rn-inplace-${Math.random().toString(36).slice(2, 7)}`;
    const namespace = await optedInNamespace(t, 'in-place-halt', { 'sidecar-injector.io/in-place-updates': 'enabled' });
    const putCandidate = await stableTemplate(t, name);
    // Three workloads: their first pods are the first bucket, enough unhealthy pods for the halt (3).
    await realNodeDeployments(namespace, name, 3, 2);
    const before = await podsWhen(namespace, 6, 'the 6 pods running with the stable sidecar', runs(name, realNode().image));
    const broken = `${realNode().registry}/test/busybox:no-such-tag`;
    await putCandidate(broken);
    const halted = await eventually('the candidate halted by its pods’ health', async () => {
      const s = (await kube.get(sidecarTemplatesPath(`${name}-next`))).status ?? {};
      return s.state === 'Stopped' && typeof s.halted === 'string' ? s : undefined;
    });
    t.regex(String(halted.halted), /^halted: 3 of 3 pods with the candidate are unhealthy/);
    const after = await podsWhen(namespace, 6, 'the 6 pods back on the stable image', runs(name, realNode().image));
    t.deepEqual(new Set(after.map((p) => p.metadata.uid)), new Set(before.map((p) => p.metadata.uid)), 'the same pods');
    for (const pod of after) t.is(appStatus(pod)!.restartCount, 0, `${pod.metadata.name}: the app container was never restarted`);
    // The broken image reached one pod per workload, never two: the others waited for it.
    const events = ((await kube.get(`/api/v1/namespaces/${namespace}/events?fieldSelector=reason%3DFailed`)).items as Json[]).filter((e) =>
      String(e.message).includes('no-such-tag'),
    );
    const failedPods = new Set(events.map((e) => e.involvedObject.name as string));
    t.is(failedPods.size, 3, [...failedPods].join(', '));
    t.is(new Set([...failedPods].map((p) => p.replace(/-[^-]+-[^-]+$/, ''))).size, 3, 'one pod of each Deployment');
  },
);

test.serial(
  'a candidate with new sidecar resources reaches the running pods through pods/resize: the kubelet’s cgroups hold them, no container restarted',
  async (t) => {
    const { kube } = joinWorld();
    const name = `rn-resize-${Math.random().toString(36).slice(2, 7)}`;
    const namespace = await optedInNamespace(t, 'in-place-resize', { 'sidecar-injector.io/in-place-updates': 'enabled' });
    const small = { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } };
    const large = { requests: { cpu: '20m', memory: '24Mi' }, limits: { cpu: '200m', memory: '48Mi' } };
    await withTemplate(t, name, stringify({ name, ...withResources(name, small) }));
    const candidatePath = sidecarTemplatesPath(`${name}-next`);
    t.teardown(() => kube.delete(candidatePath));
    await realNodeDeployments(namespace, name, 1, 2);
    const before = await podsWhen(namespace, 2, 'the 2 pods running with the stable sidecar', runs(name, realNode().image));
    for (const pod of before) {
      const id = sidecarOf(pod, name).status!.containerID as string;
      t.is(cgroupValue('memory', pod, id, 'memory.limit_in_bytes'), 32 * 1024 * 1024, 'the stable limit, before');
    }
    const started = Date.now();
    await kube.create(sidecarTemplatesPath(), {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name: `${name}-next` },
      spec: { ...withResources(name, large), name, rollout: { role: 'candidate', share: 100 } },
    });
    const candidate = await eventually('the candidate’s revision', async () => (await kube.get(candidatePath)).status?.revision as string | undefined);
    const after = await podsWhen(
      namespace,
      2,
      'the 2 pods running the candidate’s resources, its revision in their ledger',
      (pod) => runs(name, realNode().image)(pod) && ledgerRevision(pod, name) === candidate && sameResources(sidecarOf(pod, name).status?.resources, large),
    );
    t.log(`2 pods of a Deployment resized in place in ${Date.now() - started} ms (candidate stored → every ledger at the candidate)`);
    const byUid = new Map(before.map((p) => [p.metadata.uid, p]));
    for (const pod of after) {
      const was = byUid.get(pod.metadata.uid);
      t.truthy(was, `${pod.metadata.name}: the same pod`);
      t.deepEqual(sidecarOf(pod, name).spec!.resources, large);
      t.is(appStatus(pod)!.restartCount, appStatus(was!)!.restartCount, `${pod.metadata.name}: the app container was not restarted`);
      const sidecar = sidecarOf(pod, name).status!;
      t.is(sidecar.containerID, sidecarOf(was!, name).status!.containerID, `${pod.metadata.name}: the sidecar is the same container`);
      t.is(sidecar.restartCount, sidecarOf(was!, name).status!.restartCount, `${pod.metadata.name}: the sidecar was not restarted`);
      // The kubelet's cgroups: the new memory limit, and the new cpu limit as a CFS quota (200m of a 100 ms period).
      t.is(cgroupValue('memory', pod, sidecar.containerID, 'memory.limit_in_bytes'), 48 * 1024 * 1024);
      t.is(cgroupValue('cpu', pod, sidecar.containerID, 'cpu.cfs_quota_us'), 20_000);
    }
    const status = await someReplica((s) => (s['in-place-updates']?.inPlaceUpdated ?? 0) >= 2, 'the leader’s count of pods updated in place');
    t.like(status['in-place-updates'].lastRound, { refused: 0, failed: 0, resizeServed: true });
  },
);

test.serial('resources managed elsewhere: a sidecar a person resized keeps those resources when a candidate’s new image reaches it in place', async (t) => {
  const { kube, kubectl } = joinWorld();
  const name = `rn-managed-${Math.random().toString(36).slice(2, 7)}`;
  const namespace = await optedInNamespace(t, 'in-place-managed', { 'sidecar-injector.io/in-place-updates': 'enabled' });
  const small = { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } };
  const theirs = { requests: { cpu: '15m', memory: '20Mi' }, limits: { cpu: '150m', memory: '40Mi' } };
  await withTemplate(t, name, stringify({ name, resourcesManagedElsewhere: true, ...withResources(name, small) }));
  const candidatePath = sidecarTemplatesPath(`${name}-next`);
  t.teardown(() => kube.delete(candidatePath));
  await realNodeDeployments(namespace, name, 1, 1);
  const [pod] = await podsWhen(namespace, 1, 'the pod running with the stable sidecar', runs(name, realNode().image));
  // A person resizes the sidecar (as a vertical autoscaler would).
  const resize = { spec: { initContainers: [{ name, resources: theirs }] } };
  await kubectl(['-n', namespace, 'patch', 'pod', pod!.metadata.name, '--subresource', 'resize', '--type', 'strategic', '-p', JSON.stringify(resize)]);
  await podsWhen(namespace, 1, 'the sidecar running the resources the person set', (p) => sameResources(sidecarOf(p, name).status?.resources, theirs));
  const stored = await kube.get(sidecarTemplatesPath(name));
  t.is(stored.spec.resourcesManagedElsewhere, true, 'the field is in the CRD’s schema: the API server kept it');
  const next = withResources(name, { requests: { cpu: '20m', memory: '24Mi' }, limits: { cpu: '200m', memory: '48Mi' } });
  (next.initContainers as Json[])[0]!.image = realNode().pulledImage;
  await kube.create(sidecarTemplatesPath(), {
    apiVersion: 'sidecar-injector.io/v1alpha1',
    kind: 'SidecarTemplate',
    metadata: { name: `${name}-next` },
    spec: {
      ...next,
      resourcesManagedElsewhere: true,
      name,
      rollout: { role: 'candidate', share: 100 },
    },
  });
  const after = await podsWhen(
    namespace,
    1,
    'the pod running the candidate’s image and revision',
    (p) => ledgerRevision(p, name) !== ledgerRevision(pod!, name) && runs(name, realNode().pulledImage)(p),
  );
  t.is(after[0]!.metadata.uid, pod!.metadata.uid, 'the same pod');
  t.deepEqual(sidecarOf(after[0]!, name).spec!.resources, theirs, 'the person’s resources, not the candidate’s');
});

test.serial('the policy lets the injector’s ServiceAccount change a listed sidecar’s image and nothing else', async (t) => {
  const { kube, kubectl } = joinWorld();
  const name = `rn-inplace-${Math.random().toString(36).slice(2, 7)}`;
  const namespace = await optedInNamespace(t, 'in-place-policy', { 'sidecar-injector.io/in-place-updates': 'enabled' });
  // Resources in both containers: a resize changes them (it neither adds nor removes any, nor the QoS class).
  const resources = { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } };
  await withTemplate(t, name, stringify({ name, ...withResources(name, resources) }));
  await realNodeDeployments(namespace, name, 1, 1, { resources });
  const [pod] = await podsWhen(namespace, 1, 'the pod running with its sidecar', runs(name, realNode().image));
  /** The pod changed by `edit`, sent as the injector's ServiceAccount would send it (an update, server-side dry run). */
  const asInjector = async (edit: (p: Json) => void, verb: 'replace' | 'patch' = 'replace') => {
    // A list's items carry no apiVersion and kind; an update sends them.
    const changed = { apiVersion: 'v1', kind: 'Pod', ...structuredClone(pod!) };
    edit(changed);
    const args =
      verb === 'replace'
        ? ['replace', '--dry-run=server', '-o', 'name', '-f', '-']
        : ['-n', namespace, 'patch', 'pod', pod!.metadata.name, '--dry-run=server', '--type=merge', '-p', '{"metadata":{"labels":{"x":"y"}}}'];
    return kubectl(['--as', injectorAccount, ...args], JSON.stringify(changed)).then(
      (out) => ({ ok: true, text: out.stdout }),
      (err: Error) => ({ ok: false, text: err.message }),
    );
  };
  const sidecar = (p: Json) => (p.spec.initContainers as Json[]).find((c) => c.name === name)!;
  const allowed = await asInjector((p) => (sidecar(p).image = realNode().pulledImage));
  t.true(allowed.ok, allowed.text);
  const cases: [string, (p: Json) => void, RegExp][] = [
    [
      'the app container’s image',
      (p) => (p.spec.containers[0].image = realNode().pulledImage),
      /may change the image of a container only where the pod's ledger lists it/,
    ],
    [
      'the app listed in the ledger, and its image',
      (p) => {
        const ledger = JSON.parse(p.metadata.annotations['sidecar-injector.io/status']);
        ledger.templates[name].containers = ['app'];
        p.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify(ledger);
        p.spec.containers[0].image = realNode().pulledImage;
      },
      /may not change which containers the ledger lists/,
    ],
    [
      'a parameter the ledger records',
      (p) => {
        const ledger = JSON.parse(p.metadata.annotations['sidecar-injector.io/status']);
        ledger.templates[name].params = { level: 'debug' };
        p.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify(ledger);
      },
      /may change in the ledger only the revisions and the restarts it caused/,
    ],
    ['a label', (p) => (p.metadata.labels.extra = 'yes'), /may change no label and no annotation but its ledger/],
    ['another annotation', (p) => (p.metadata.annotations['example.com/x'] = 'y'), /may change no label and no annotation but its ledger/],
    [
      'a toleration',
      (p) => p.spec.tolerations.push({ key: 'x', operator: 'Exists', effect: 'NoSchedule' }),
      /may change no deadline, grace period, toleration/,
    ],
    ['a deadline', (p) => (p.spec.activeDeadlineSeconds = 60), /may change no deadline, grace period, toleration/],
  ];
  for (const [what, edit, expected] of cases) {
    const refused = await asInjector(edit);
    t.false(refused.ok, `${what}: refused`);
    t.regex(refused.text, expected, what);
    t.regex(refused.text, /ValidatingAdmissionPolicy 'sidecar-injector-in-place-updates'/, what);
  }
  // The revision and the restarts it caused, with the sidecar's image: admitted.
  const moved = await asInjector((p) => {
    const ledger = JSON.parse(p.metadata.annotations['sidecar-injector.io/status']);
    ledger.templates[name].hash = '0123456789ab';
    ledger.templates[name].restarts = { [name]: 1 };
    p.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify(ledger);
    sidecar(p).image = realNode().pulledImage;
  });
  t.true(moved.ok, moved.text);
  // A resize (pods/resize) of the sidecar is the policy's to allow; of the app container, refused.
  const resize = (edit: (p: Json) => void) => {
    const changed = { apiVersion: 'v1', kind: 'Pod', ...structuredClone(pod!) };
    edit(changed);
    return kubectl(['--as', injectorAccount, 'replace', '--subresource', 'resize', '--dry-run=server', '-o', 'name', '-f', '-'], JSON.stringify(changed)).then(
      (out) => ({ ok: true, text: out.stdout }),
      (err: Error) => ({ ok: false, text: err.message }),
    );
  };
  const sidecarResized = await resize((p) => (sidecar(p).resources = { requests: { cpu: '20m', memory: '16Mi' }, limits: { cpu: '200m', memory: '32Mi' } }));
  t.true(sidecarResized.ok, sidecarResized.text);
  const appResized = await resize(
    (p) => (p.spec.containers[0].resources = { requests: { cpu: '20m', memory: '16Mi' }, limits: { cpu: '200m', memory: '32Mi' } }),
  );
  t.false(appResized.ok, 'a resize of the app container: refused');
  t.regex(appResized.text, /may change the resources \(and resize policy\) of a container only where the pod's ledger lists it/);
  // A namespace that has not opted in: refused, whatever the change.
  await kube.mergePatch(`/api/v1/namespaces/${namespace}`, { metadata: { labels: { 'sidecar-injector.io/in-place-updates': null } } });
  const notOptedIn = await asInjector((p) => (sidecar(p).image = realNode().pulledImage));
  t.false(notOptedIn.ok);
  t.regex(notOptedIn.text, /updates pods in place only in namespaces labelled sidecar-injector.io\/in-place-updates=enabled/);
  // The right is update alone: a patch is refused by RBAC before any policy.
  const patched = await asInjector(() => undefined, 'patch');
  t.false(patched.ok);
  t.regex(patched.text, /cannot patch resource "pods"/);
  // The same update by an administrator is no concern of the policy.
  const admin = await kubectl(
    ['replace', '--dry-run=server', '-o', 'name', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Pod', ...pod, metadata: { ...pod!.metadata, labels: { ...pod!.metadata.labels, extra: 'yes' } } }),
  );
  t.regex(admin.stdout, /^pod\//);
});
