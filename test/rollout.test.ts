/**
 * Safe rollout: a candidate revision beside the stable one in the templates directory, a share
 * of workloads bucketed by owner (never a mixed workload), namespace and pod-label scoping,
 * promote and abort by editing the directory, the fixed point across a promotion and the
 * audit's verdict by revision.
 */
import test from 'ava';
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admitPod, type PodOutcome } from '../src/pipeline/admit.js';
import { auditPod } from '../src/pipeline/audit.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { bucketOf, bucketKey, revisionsFor, stopCandidates } from '../src/templates/rollout.js';
import type { TemplateSet } from '../src/templates/set.js';
import { TemplateError } from '../src/errors.js';
import { optedIn, pod } from './helpers/pods.js';
import { bareExampleText } from './helpers/templates.js';

const shipperText = bareExampleText('log-shipper');
/** The bundled log shipper with another image: what a new sidecar release looks like. */
const release = (tag: string) => shipperText.replace('fluent/fluent-bit:3.2.2', `fluent/fluent-bit:${tag}`);
const candidate = (stanza: string, tag = '3.2.3') => `rollout:\n${stanza}\n${release(tag)}`;

/** A templates directory with these files. */
async function directory(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rollout-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}
async function load(files: Record<string, string>): Promise<TemplateSet> {
  const dir = await directory(files);
  try {
    return await loadTemplateDir(dir);
  } finally {
    await rm(dir, { recursive: true });
  }
}
async function problemsOf(files: Record<string, string>): Promise<string[]> {
  const err = await load(files).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof TemplateError)) return [];
  return err.problems.map((p) => `${p.file}: ${p.field}: ${p.message}`);
}

type Owner = { kind: string; name: string; hash?: string };
/** A pod of `owner` (a ReplicaSet's carries the Deployment's pod-template-hash), as its controller creates it. */
function podOf(owner: Owner | undefined, labels: Record<string, string> = { app: 'web' }, generateName = 'web-') {
  const p = pod({ generateName, labels: { ...labels, ...(owner?.hash ? { 'pod-template-hash': owner.hash } : {}) } });
  if (owner) p.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: owner.kind, name: owner.name, uid: 'u-1', controller: true }];
  return p;
}
const namespaces = optedIn('shop', 'team-a', 'team-b');
async function admit(set: TemplateSet, p: unknown, namespace = 'shop'): Promise<PodOutcome> {
  return admitPod({ pod: p, namespace, name: '' }, { templates: () => set, namespaces });
}
/** The log shipper's revision the pod got, from its ledger. */
function revisionOf(outcome: PodOutcome): string | undefined {
  if (outcome.decision !== 'patched') return undefined;
  const ledger = JSON.parse((outcome.injection.pod.metadata as any).annotations['sidecar-injector.io/status']);
  return ledger.templates['log-shipper']?.hash;
}

const stable = { 'log-shipper.yaml': shipperText };
const canary = (share: number, extra = '') => ({ ...stable, 'log-shipper-next.yaml': candidate(`  role: candidate\n  share: ${share}\n${extra}`) });

test('a candidate is a second file with a rollout stanza; its revision is its content without the stanza', async (t) => {
  const set = await load(canary(10));
  const rollout = set.rollouts?.get('log-shipper');
  t.truthy(rollout);
  t.is(set.byName.get('log-shipper')!.file, 'log-shipper.yaml', 'the stable revision is in force by default');
  t.is(rollout!.candidate!.file, 'log-shipper-next.yaml');
  const plain = await load({ 'log-shipper.yaml': release('3.2.3') });
  t.is(rollout!.candidate!.hash, plain.byName.get('log-shipper')!.hash, 'promoting (dropping the stanza) keeps the revision');
  t.not(rollout!.candidate!.hash, rollout!.stable.hash);
  t.is(rollout!.stanza!.share, 10);
  // Without a candidate or previous revision the set is as before.
  t.is((await load(stable)).rollouts, undefined);
});

test('every mistake in a rollout stanza or the directory shape is named, file and field', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [canary(101), /log-shipper-next\.yaml: rollout\.share: a candidate needs share: a percentage of workloads from 0 to 100/],
    [canary(12.345), /rollout\.share: at most two decimals/],
    [{ ...stable, 'n.yaml': candidate('  role: canary\n  share: 5') }, /rollout\.role: must be one of candidate, previous/],
    [{ ...stable, 'n.yaml': candidate('  role: candidate\n  share: 5\n  surge: 1') }, /rollout\.surge: unknown field "surge"/],
    [{ ...stable, 'n.yaml': candidate('  role: previous\n  share: 5') }, /rollout: share, namespaces and podSelector belong to a candidate/],
    [canary(5, '  namespaces: [Team_A]'), /rollout\.namespaces\[0\]: must be a namespace name/],
    [canary(5, '  podSelector: {matchLabels: {"a b": x}}'), /rollout\.podSelector\.matchLabels\["a b"\]/],
    [{ 'n.yaml': candidate('  role: candidate\n  share: 5') }, /n\.yaml: rollout: template "log-shipper" has no stable revision/],
    [{ ...canary(5), 'again.yaml': candidate('  role: candidate\n  share: 5', '3.2.4') }, /has a candidate revision already, in/],
    [
      { ...stable, 'same.yaml': `rollout:\n  role: candidate\n  share: 5\n${shipperText}` },
      /same\.yaml: rollout: the same content as the stable revision in log-shipper\.yaml/,
    ],
    [{ ...stable, 'n.yaml': `rollout: yes\n${release('9')}` }, /n\.yaml: rollout: must be a map/],
  ];
  for (const [files, expected] of cases) {
    const problems = await problemsOf(files);
    t.true(
      problems.some((p) => expected.test(p)),
      `${expected}: ${problems.join(' | ')}`,
    );
  }
});

/** `count` workloads of the kinds that own pods, two pods each (a Deployment's from two ReplicaSets). */
function workloads(count: number): { key: string; pods: Record<string, any>[] }[] {
  const out = [];
  for (let i = 0; i < count; i++) {
    const kind = ['Deployment', 'StatefulSet', 'DaemonSet', 'Job'][i % 4]!;
    const name = `app-${i}`;
    const pods =
      kind === 'Deployment'
        ? [podOf({ kind: 'ReplicaSet', name: `${name}-5d8f9c`, hash: '5d8f9c' }), podOf({ kind: 'ReplicaSet', name: `${name}-7b6c4d`, hash: '7b6c4d' })]
        : [podOf({ kind, name }), podOf({ kind, name })];
    out.push({ key: `${kind}/${name}`, pods });
  }
  return out;
}

for (const share of [0, 10, 100]) {
  test(`a share of ${share} % over 400 workloads: within bounds, never a mixed workload`, async (t) => {
    const set = await load(canary(share));
    const { stable: old, candidate: next } = set.rollouts!.get('log-shipper')!;
    let onCandidate = 0;
    for (const workload of workloads(400)) {
      const revisions = new Set<string | undefined>();
      for (const p of workload.pods) revisions.add(revisionOf(await admit(set, p)));
      t.is(revisions.size, 1, `${workload.key} runs one revision`);
      const [revision] = revisions;
      t.true(revision === old.hash || revision === next!.hash, `${workload.key} got ${revision}`);
      if (revision === next!.hash) onCandidate++;
    }
    // Deterministic buckets: 10 % of 400 is 40; a sound hash keeps it well within 40 ± 20.
    if (share === 0) t.is(onCandidate, 0);
    else if (share === 100) t.is(onCandidate, 400);
    else t.true(onCandidate >= 20 && onCandidate <= 60, `${onCandidate} of 400 on the candidate`);
  });
}

test('raising a share only adds workloads; the bucket is per template and workload, not per pod', async (t) => {
  const all = workloads(300).map((w) => w.pods[0]!);
  const chosen = async (share: number) => {
    const set = await load(canary(share));
    const next = set.rollouts!.get('log-shipper')!.candidate!.hash;
    const picked = new Set<number>();
    for (const [i, p] of all.entries()) if (revisionOf(await admit(set, p)) === next) picked.add(i);
    return picked;
  };
  const ten = await chosen(10);
  const thirty = await chosen(30);
  t.true(ten.size > 0 && thirty.size > ten.size);
  for (const i of ten) t.true(thirty.has(i), `workload ${i} stays on the candidate`);
  // Two ReplicaSets of one Deployment are one workload; a bare pod is bucketed by its generateName.
  const subject = (owner: Owner | undefined, generateName = 'web-') => ({
    namespace: 'shop',
    name: generateName,
    labels: (owner?.hash ? { 'pod-template-hash': owner.hash } : {}) as Record<string, string>,
    ...(owner ? { owner } : {}),
  });
  t.is(bucketKey(subject({ kind: 'ReplicaSet', name: 'web-5d8f9c', hash: '5d8f9c' })), 'shop/Deployment/web');
  t.is(bucketKey(subject({ kind: 'ReplicaSet', name: 'web-5d8f9c' })), 'shop/ReplicaSet/web-5d8f9c', 'no hash label: the ReplicaSet itself');
  t.is(bucketKey(subject(undefined, 'batch-')), 'shop/Pod/batch-');
  t.not(bucketOf('log-shipper', 'shop/Deployment/web'), bucketOf('proxy', 'shop/Deployment/web'));
});

test('a candidate scoped to namespaces and pod labels takes only pods of both', async (t) => {
  const set = await load(canary(100, '  namespaces: [team-a]\n  podSelector: {matchLabels: {tier: canary}}'));
  const next = set.rollouts!.get('log-shipper')!.candidate!.hash;
  const old = set.byName.get('log-shipper')!.hash;
  const web = { kind: 'StatefulSet', name: 'web' };
  t.is(revisionOf(await admit(set, podOf(web, { app: 'web', tier: 'canary' }), 'team-a')), next);
  t.is(revisionOf(await admit(set, podOf(web, { app: 'web' }), 'team-a')), old);
  t.is(revisionOf(await admit(set, podOf(web, { app: 'web', tier: 'canary' }), 'team-b')), old);
});

test('a stopped candidate takes no pod, and the set it is stopped in is another object (the answer cache keys on it)', async (t) => {
  const set = await load(canary(100));
  const stopped = stopCandidates(set, new Map([['log-shipper', 'preflight failed']]));
  t.not(stopped, set);
  t.is(stopCandidates(stopped, new Map([['log-shipper', 'preflight failed']])), stopped, 'nothing changed: the same set');
  const p = podOf({ kind: 'StatefulSet', name: 'db' });
  t.is(revisionOf(await admit(stopped, p)), set.byName.get('log-shipper')!.hash);
  t.is(revisionsFor(stopped, { namespace: 'shop', name: 'db-', labels: {}, owner: { kind: 'StatefulSet', name: 'db' } }), stopped);
  t.is(revisionOf(await admit(stopCandidates(stopped, new Map()), p)), set.rollouts!.get('log-shipper')!.candidate!.hash);
});

test('promote and abort by editing the directory; the fixed point across a promotion; the audit by revision', async (t) => {
  const during = await load(canary(50));
  const oldHash = during.byName.get('log-shipper')!.hash;
  const newHash = during.rollouts!.get('log-shipper')!.candidate!.hash;
  // Find a workload in the share and one outside it.
  const injected = new Map<string, Record<string, any>>();
  for (let i = 0; injected.size < 2 && i < 100; i++) {
    const p = podOf({ kind: 'StatefulSet', name: `db-${i}` });
    const outcome = await admit(during, p);
    const revision = revisionOf(outcome)!;
    if (!injected.has(revision) && outcome.decision === 'patched') injected.set(revision, outcome.injection.pod as Record<string, any>);
  }
  t.deepEqual([...injected.keys()].sort(), [oldHash, newHash].sort());

  // Promote: the candidate loses its stanza, the old stable becomes the previous revision.
  const promoted = await load({ 'log-shipper.yaml': release('3.2.3'), 'log-shipper-previous.yaml': `rollout:\n  role: previous\n${shipperText}` });
  t.is(promoted.byName.get('log-shipper')!.hash, newHash);
  t.is(promoted.rollouts!.get('log-shipper')!.previous!.hash, oldHash);
  t.is(promoted.rollouts!.get('log-shipper')!.candidate, undefined);
  for (const [revision, p] of injected) {
    // A second call (a reinvocation, a retried create) after the promotion patches nothing.
    const again = await admit(promoted, p);
    t.is(again.decision, 'allowed', `the pod with ${revision}`);
    t.is(again.reason, 'already-injected');
    // The audit calls the pod with the old revision stale, the other current.
    const metadata = p.metadata as { labels: Record<string, string>; annotations: Record<string, string>; ownerReferences: unknown };
    const verdict = auditPod(
      { namespace: 'shop', name: 'db-0', labels: metadata.labels, annotations: metadata.annotations, ownerReferences: metadata.ownerReferences },
      { 'sidecar-injector.io/injection': 'enabled' },
      promoted,
    );
    t.is(verdict.state, revision === newHash ? 'current' : 'stale');
    // During the rollout, the audit wants the revision in force for that workload: both current.
    t.is(
      auditPod(
        { namespace: 'shop', name: 'db-0', labels: metadata.labels, annotations: metadata.annotations, ownerReferences: metadata.ownerReferences },
        { 'sidecar-injector.io/injection': 'enabled' },
        during,
      ).state,
      'current',
    );
  }
  // Every new pod gets the promoted revision.
  t.is(revisionOf(await admit(promoted, podOf({ kind: 'DaemonSet', name: 'agent' }))), newHash);

  // Abort: share 0 (or the candidate file deleted): no new pod gets it; pods that have it are stale.
  const aborted = await load(canary(0));
  for (const w of workloads(40)) t.is(revisionOf(await admit(aborted, w.pods[0])), oldHash);
  const withNew = injected.get(newHash)!.metadata as { labels: Record<string, string>; annotations: Record<string, string>; ownerReferences: unknown };
  t.is(auditPod({ namespace: 'shop', name: 'db-0', ...withNew }, { 'sidecar-injector.io/injection': 'enabled' }, aborted).state, 'stale');
});
