/**
 * Safe rollout on a real cluster, with the rollout-preflight component applied as an overlay:
 * the preflight's dry-run probe goes through kube-apiserver's own admission chain, so a
 * ValidatingAdmissionPolicy that refuses the candidate's image stops the candidate before any
 * real pod gets it; a candidate that passes takes its share per workload over real Deployments
 * and their ReplicaSets, one revision per workload, across a `kubectl rollout restart`; replicas
 * installed without the component stop every candidate.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bucketOf } from '../../src/templates/rollout.js';
import {
  cli,
  deploy,
  deployOverlay,
  eventually,
  everyReplica,
  healthyInstall,
  injectorPods,
  joinWorld,
  onRealNode,
  optedInNamespace,
  plainPod,
  podPolicy,
  restoreShipped,
  restrictedSecurityContext,
  scaleInjector,
  sidecarTemplate,
  sidecarTemplatesPath,
  type Json,
} from './helpers.js';

const stable = sidecarTemplate(readFileSync('templates/log-shipper.yaml', 'utf8'));
const stableImage = 'fluent/fluent-bit:3.2.2';
const candidatePath = sidecarTemplatesPath('log-shipper-next');

/** Stores the log shipper with another image as its candidate with `share` (the SidecarTemplate log-shipper-next), or changes it. */
async function putCandidate(image: string, share: number): Promise<void> {
  const { kube } = joinWorld();
  const spec = { ...JSON.parse(JSON.stringify(stable.spec).replaceAll(stableImage, image)), name: 'log-shipper', rollout: { role: 'candidate', share } };
  if (await kube.find(candidatePath)) await kube.mergePatch(candidatePath, { spec });
  else
    await kube.create(sidecarTemplatesPath(), {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name: 'log-shipper-next' },
      spec,
    });
}

/** The status the leader wrote on the candidate's SidecarTemplate. */
const candidateStatus = async (): Promise<Json> => (await joinWorld().kube.get(candidatePath)).status ?? {};

const shipperImage = (pod: Json) => ((pod.spec.initContainers ?? []) as Json[]).find((c) => c.name === 'log-shipper')?.image as string | undefined;

test.before(() => deployOverlay('test/cluster/overlays/rollout', '--rollout-probe-namespace=sidecar-injector-probes'));

test.after.always(async () => {
  const { kube } = joinWorld();
  if (await kube.find(candidatePath)) await kube.delete(candidatePath);
  await restoreShipped('--rollout-probe-namespace');
});

test.serial(
  'a policy that refuses the candidate’s image fails its preflight through the real chain: the candidate is stopped, and no real pod gets it',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await optedInNamespace(t, 'canary');
    const policy = 'deny-unsigned-fluent-bit';
    await podPolicy(t, policy, {
      expression: "!has(object.spec.initContainers) || !object.spec.initContainers.exists(c, c.image.startsWith('fluent/fluent-bit:9.'))",
      message: 'fluent-bit 9 is not signed',
    });
    // Policies are read through an informer: in force a moment after they are created.
    const signed = (image: string) => ({
      ...plainPod('policy-probe'),
      metadata: { name: 'policy-probe', labels: { 'sidecar-injector.io/inject': 'disabled' } },
      spec: { initContainers: [{ name: 'shipper', image, restartPolicy: 'Always' }], containers: [{ name: 'app', image: 'registry.example/app:1' }] },
    });
    await eventually(
      'the image policy in force',
      async () => (await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, signed('fluent/fluent-bit:9.9.9'))).status === 422,
    );
    const started = new Date().toISOString();
    await putCandidate('fluent/fluent-bit:9.9.9', 100);
    // From the moment the candidate is stored, every pod created is admitted with the stable image.
    const replicas = (await kube.get('/api/v1/namespaces/sidecar-injector/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dwebhook')).items.length;
    const images = new Set<string>();
    let created = 0;
    const events = await eventually(`a RolloutPreflightFailed Event from each of the ${replicas} replicas`, async () => {
      const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, plainPod(`during-${created++}`));
      t.is(answer.status, 201, `created while the candidate is tried (${answer.body.message ?? ''})`);
      images.add(String(shipperImage(answer.body)));
      const { stdout } = await kubectl([
        'get',
        'events',
        // The candidate's SidecarTemplate is cluster-scoped: its Events live in default.
        '-n',
        'default',
        '--field-selector',
        'involvedObject.name=log-shipper-next,reason=RolloutPreflightFailed',
        '-o',
        'json',
      ]);
      const items = (JSON.parse(stdout).items as Json[]).filter((e) => (e.eventTime ?? e.firstTimestamp) >= started);
      return new Set(items.map((e) => e.reportingInstance)).size >= replicas ? items : undefined;
    });
    t.deepEqual([...images], [stableImage], `${created} pods, every one with the stable revision`);
    t.regex(events[0]!.message, /failed its preflight \(refused\): .*fluent-bit 9 is not signed/);
    // The Events name the object with its uid: kubectl describe shows them under it.
    const described = (await kubectl(['describe', 'sidecartemplate', 'log-shipper-next'])).stdout;
    t.regex(described, /Warning\s+RolloutPreflightFailed\s+.*Candidate revision [0-9a-f]{12} of template log-shipper failed its preflight \(refused\)/);
    const status = await kube.get('/api/v1/namespaces/sidecar-injector/services/https:sidecar-injector:8443/proxy/status');
    const shown = (status.rollout.candidates as Json[]).find((c) => c.template === 'log-shipper');
    t.is(shown?.takesPods, false);
    t.is((status.rollout.results as Json[]).find((r) => r.template === 'log-shipper')?.failure, 'refused');
    // kubectl get sidecartemplates shows it stopped, and why, in the status the leader writes.
    // The leader's own preflight: pending at first, then failed.
    const written = await eventually('the candidate’s status: Stopped, its preflight failed', async () => {
      const status = await candidateStatus();
      return status.state === 'Stopped' && (status.conditions as Json[]).some((c) => c.type === 'Halted' && c.reason === 'PreflightFailed')
        ? status
        : undefined;
    });
    t.like(written, { template: 'log-shipper', role: 'candidate', share: '100%', state: 'Stopped' });
    // The leader's preflight in the status, with the API server's words and the replica that ran it.
    t.like(written.preflight, { state: 'failed', failure: 'refused' });
    t.regex(String(written.preflight.message), /fluent-bit 9 is not signed/);
    t.true(
      (await injectorPods()).some((p) => p.metadata.name === written.preflight.replica),
      `the replica ${written.preflight.replica} is one of the injector's`,
    );
    // The real API server stores what the leader writes (the CRD declares every field): no replica says it kept less.
    for (const pod of await injectorPods()) {
      const logs = (await kubectl(['-n', 'sidecar-injector', 'logs', pod.metadata.name, '-c', 'injector'])).stdout;
      t.notRegex(logs, /stored less of the SidecarTemplate status/, pod.metadata.name);
    }
    // rollout status reads it from there, from any folder.
    const report = await cli(['rollout', 'status', '-o', 'json'], { cwd: tmpdir() });
    t.is(report.code, 0, report.stderr);
    t.like(
      (JSON.parse(report.stdout).objects as Json[]).find((o) => o.name === 'log-shipper-next'),
      { role: 'candidate', state: 'Stopped', preflight: { state: 'failed', failure: 'refused' } },
    );
    t.like(
      (written.conditions as Json[]).find((c) => c.type === 'Halted'),
      { status: 'True', reason: 'PreflightFailed' },
    );
    // The commands predict what the replicas do: the stopped candidate takes no pod in the audit
    // either, so the pods created meanwhile, with the stable revision, are current (not stale).
    const audit = await cli(['audit', '-n', namespace, '-o', 'json'], { cwd: tmpdir() });
    t.is(audit.code, 0, audit.stderr);
    const states = (JSON.parse(audit.stdout).pods as Json[]).flatMap((p) =>
      ((p.templates ?? []) as Json[]).filter((v) => v.name === 'log-shipper').map((v) => v.state),
    );
    t.true(states.length >= created && created > 0, `${states.length} audited of ${created} created`);
    t.deepEqual([...new Set(states)], ['current']);
    const table = (await kubectl(['get', 'sidecartemplates'])).stdout;
    t.regex(table, /^NAME\s+TEMPLATE\s+REVISION\s+ROLE\s+SHARE\s+STATE\s+PREFLIGHT\s+CURRENT\s+STALE\s+MISSING\s+AGE$/m);
    t.regex(table, /^log-shipper-next\s+log-shipper\s+[0-9a-f]{12}\s+candidate\s+100%\s+Stopped\s+failed\s/m);
  },
);

test.serial(
  'a candidate that passes takes its share per workload: every pod of a Deployment has one revision, the workloads bucketed as the share says, across a rollout restart',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await optedInNamespace(t, 'share', { 'sidecar-injector.test/pods': 'simulated' });
    const nextImage = 'fluent/fluent-bit:3.3.0';
    const share = 50;
    await putCandidate(nextImage, share);
    const inShare = (name: string) => bucketOf('log-shipper', `${namespace}/Deployment/${name}`) < share * 100;
    // Every replica has passed the candidate's preflight: it takes its share everywhere.
    await everyReplica(
      (status) => (status.rollout.candidates as Json[]).some((c) => c.template === 'log-shipper' && c.takesPods === true && c.share === share),
      'every replica giving the candidate its share',
    );
    const deployments = Array.from({ length: 12 }, (_, i) => `app-${i}`);
    for (const name of deployments) await kubectl(['create', 'deployment', name, '-n', namespace, '--image=registry.example/app:1', '--replicas=2']);
    const revisions = async () => {
      const pods = (await kube.get(`/api/v1/namespaces/${namespace}/pods`)).items as Json[];
      const byDeployment = new Map<string, Set<string>>();
      for (const pod of pods) {
        const deployment = String(pod.metadata.labels.app);
        if (!byDeployment.has(deployment)) byDeployment.set(deployment, new Set());
        byDeployment.get(deployment)!.add(String(shipperImage(pod)));
      }
      return { pods, byDeployment };
    };
    const first = await eventually('every Deployment available with its 2 pods', async () => {
      const { pods, byDeployment } = await revisions();
      const ready = await Promise.all(
        deployments.map(async (d) => (await kube.get(`/apis/apps/v1/namespaces/${namespace}/deployments/${d}`)).status.availableReplicas === 2),
      );
      return pods.length === 24 && ready.every(Boolean) ? byDeployment : undefined;
    });
    for (const name of deployments) t.deepEqual([...first.get(name)!], [inShare(name) ? nextImage : stableImage], `${name}: one revision, as bucketed`);
    const taking = deployments.filter(inShare);
    t.true(taking.length > 0 && taking.length < deployments.length, `${taking.length} of ${deployments.length} take the candidate`);
    // A restart makes a new ReplicaSet: the workload is the Deployment, so its pods keep their revision.
    const restarted = [taking[0]!, deployments.find((d) => !inShare(d))!];
    for (const name of restarted) await kubectl(['rollout', 'restart', `deployment/${name}`, '-n', namespace]);
    for (const name of restarted) await kubectl(['rollout', 'status', `deployment/${name}`, '-n', namespace, '--timeout=120s']);
    const after = await eventually('the restarted Deployments with 2 pods each, the old ones gone', async () => {
      const { pods, byDeployment } = await revisions();
      return restarted.every((d) => pods.filter((p) => p.metadata.labels.app === d && !p.metadata.deletionTimestamp).length === 2) ? byDeployment : undefined;
    });
    for (const name of restarted) t.deepEqual([...after.get(name)!], [inShare(name) ? nextImage : stableImage], `${name} after a restart`);
    t.like(
      await eventually('the candidate’s status: taking its share', async () =>
        (await candidateStatus()).state === 'Candidate' ? candidateStatus() : undefined,
      ),
      {
        share: '50%',
        role: 'candidate',
      },
    );
  },
);

test.serial(
  'a lone replica starting beside a candidate: its own probe reaches it once it is behind the Service, the candidate passes, and no failure is reported',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    t.teardown(() => scaleInjector(2));
    t.truthy(await kube.find(candidatePath), 'the passing candidate of the test before is stored');
    await scaleInjector(1);
    const [old] = await injectorPods();
    await kube.delete(`/api/v1/namespaces/sidecar-injector/pods/${old!.metadata.name}`);
    const fresh = await eventually('a new replica, ready', async () => {
      const pods = (await injectorPods()).filter((p) => p.metadata.name !== old!.metadata.name && !p.metadata.deletionTimestamp);
      return pods.find((p) => p.status?.conditions?.some((c: Json) => c.type === 'Ready' && c.status === 'True'));
    });
    const name = fresh.metadata.name as string;
    await eventually('its preflight passed', async () => {
      const s = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${name}:8443/proxy/status`);
      return (s.rollout.candidates as Json[]).some((c) => c.template === 'log-shipper' && c.takesPods === true);
    });
    const { stdout } = await kubectl(['get', 'events', '-n', 'default', '--field-selector', 'reason=RolloutPreflightFailed', '-o', 'json']);
    t.deepEqual(
      (JSON.parse(stdout).items as Json[]).filter((e) => e.reportingInstance === name).map((e) => e.message),
      [],
      'no RolloutPreflightFailed from the replica that was only starting',
    );
  },
);

test.serial(
  'a candidate whose own namespaceSelector leaves out the probe namespace: the preflight says so and how to fix it, not that the namespace is not opted in',
  async (t) => {
    const { kube } = joinWorld();
    const { kubectl } = joinWorld();
    const spec = {
      ...JSON.parse(JSON.stringify(stable.spec).replaceAll(stableImage, 'fluent/fluent-bit:3.2.4')),
      name: 'log-shipper',
      namespaceSelector: { matchLabels: { team: 'payments' } },
      rollout: { role: 'candidate', share: 100 },
    };
    if (await kube.find(candidatePath)) await kube.delete(candidatePath);
    await kube.create(sidecarTemplatesPath(), {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: { name: 'log-shipper-next' },
      spec,
    });
    const status = await eventually('the candidate stopped: its probe kept out', async () => {
      const s = await candidateStatus();
      return s.state === 'Stopped' && /namespaceSelector/.test(String(s.message)) ? s : undefined;
    });
    t.regex(
      String(status.message),
      /preflight failed \(not-injected\): .*the candidate's namespaceSelector does not select the probe namespace sidecar-injector-probes: it needs team=payments, and the namespace has no label team; fix: give the probe namespace that label \(kubectl label namespace sidecar-injector-probes team=payments --overwrite\)/,
    );
    t.notRegex(String(status.message), /is not opted in/);
    // The Event follows the status (written after the result), on the object kubectl describe shows.
    const described = await eventually('the Event under kubectl describe', async () => {
      const out = (await kubectl(['describe', 'sidecartemplate', 'log-shipper-next'])).stdout;
      return /RolloutPreflightFailed/.test(out) ? out : undefined;
    });
    t.regex(described, /failed its preflight \(not-injected\)/);
    await kube.delete(candidatePath);
  },
);

/** How a candidate fails on the real node: its sidecar exits at once (a crash loop), or runs and never passes its readiness probe. */
type Failure = 'crash-loop' | 'never-ready';

/** A busybox sidecar on the real node for the pods of the `failure` test: waits until stopped, or (`fails`) fails as `failure` says. */
function realNodeSidecar(name: string, failure: Failure, fails: boolean): Json {
  const image = joinWorld().file.realNode!.image;
  return {
    name,
    description: 'a sidecar on the real node',
    injection: 'automatic',
    failurePolicy: 'Ignore',
    objectSelector: { matchLabels: { 'real-node-test': `halt-${failure}` } },
    initContainers: [
      {
        name,
        image,
        imagePullPolicy: 'IfNotPresent',
        restartPolicy: 'Always',
        command: [
          'sh',
          '-c',
          fails && failure === 'crash-loop' ? 'echo the candidate fails at start; exit 1' : "trap 'exit 0' TERM; while true; do sleep 1; done",
        ],
        readinessProbe: { exec: { command: fails && failure === 'never-ready' ? ['false'] : ['true'] }, periodSeconds: 1 },
        // The probe namespace enforces Pod Security restricted: a sidecar that violates it is left out of the probe.
        securityContext: restrictedSecurityContext,
      },
    ],
  };
}

for (const failure of ['crash-loop', 'never-ready'] as const)
  test.serial(
    `a candidate whose sidecar ${failure === 'crash-loop' ? 'crash-loops' : 'never gets ready'} on the real node is halted by its pods’ health: new pods get the stable revision, and its status, Event and /status say why`,
    async (t) => {
      const { kube, kubectl } = joinWorld();
      const namespace = await optedInNamespace(t, 'halt');
      const name = `rn-halt-${Math.random().toString(36).slice(2, 7)}`;
      const { name: _stableName, ...stableSpec } = realNodeSidecar(name, failure, false);
      await kube.create(sidecarTemplatesPath(), { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name }, spec: stableSpec });
      await kube.create(sidecarTemplatesPath(), {
        apiVersion: 'sidecar-injector.io/v1alpha1',
        kind: 'SidecarTemplate',
        metadata: { name: `${name}-next` },
        spec: { ...realNodeSidecar(name, failure, true), rollout: { role: 'candidate', share: 100 } },
      });
      t.teardown(async () => {
        await kube.delete(sidecarTemplatesPath(`${name}-next`)).catch(() => undefined);
        await kube.delete(sidecarTemplatesPath(name)).catch(() => undefined);
      });
      await everyReplica(
        (status) => (status.rollout.candidates as Json[]).some((c) => c.template === name && c.takesPods === true),
        'every replica giving the candidate every pod (its preflight passed)',
      );
      const isCandidate = (pod: Json) => JSON.stringify((pod.spec.initContainers ?? []) as Json[]).includes(failure === 'crash-loop' ? 'exit 1' : '"false"');
      const labels = { 'real-node-test': `halt-${failure}`, 'logging.example.com/ship': 'false' };
      const image = joinWorld().file.realNode!.image;
      await kube.create(`/apis/apps/v1/namespaces/${namespace}/deployments`, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'canary' },
        spec: {
          replicas: 3,
          selector: { matchLabels: { app: 'canary' } },
          template: {
            metadata: { labels: { ...labels, app: 'canary' } },
            spec: onRealNode({ containers: [{ name: 'app', image, command: ['sleep', '3600'] }] }),
          },
        },
      });
      // The kubelet runs them: the candidate's sidecar exits and is restarted with a back-off, or runs unready.
      const failing = await eventually(`the Deployment’s 3 pods with the candidate, its sidecar ${failure}`, async () => {
        const pods = ((await kube.get(`/api/v1/namespaces/${namespace}/pods?labelSelector=app%3Dcanary`)).items as Json[]).filter(
          (p) => !p.metadata.deletionTimestamp,
        );
        const sidecar = (p: Json) => ((p.status?.initContainerStatuses ?? []) as Json[]).find((c) => c.name === name);
        const shown = pods.filter((p) =>
          failure === 'crash-loop' ? sidecar(p)?.state?.waiting?.reason === 'CrashLoopBackOff' : sidecar(p)?.state?.running && sidecar(p)?.ready === false,
        );
        return shown.length === 3 ? pods : undefined;
      });
      t.true(failing.every(isCandidate), 'every pod got the candidate');
      // The health look (each minute, on every replica) halts it.
      const status = await eventually('the candidate’s status: Stopped, halted by its pods’ health', async () => {
        const s = (await kube.get(sidecarTemplatesPath(`${name}-next`))).status ?? {};
        return s.state === 'Stopped' && ((s.conditions ?? []) as Json[]).some((c) => c.type === 'Halted' && c.reason === 'Halted') ? s : undefined;
      });
      t.regex(
        String(status.message),
        failure === 'crash-loop'
          ? /takes no pod: halted: 3 of 3 pods with the candidate are unhealthy (\([\w ,]+\) )?\(pod halt-\w+\/canary-[-\w]+: container rn-halt-\w+ (is waiting: CrashLoopBackOff|restarted \d+ times|not ready for \d+ s); /
          : /takes no pod: halted: 3 of 3 pods with the candidate are unhealthy \(3 not ready\) \(pod halt-\w+\/canary-[-\w]+: container rn-halt-\w+ not ready for \d+ s; /,
      );
      // The halt and the look that made it, in the status; rollout status shows them.
      t.regex(String(status.halted), /^halted: 3 of 3 pods with the candidate are unhealthy/);
      t.like(status.health, { pods: 3 });
      t.like(status.preflight, { state: 'passed' });
      const shown = await cli(['rollout', 'status'], { cwd: tmpdir() });
      t.is(shown.code, 0, shown.stderr);
      t.regex(shown.stdout, new RegExp(`^${name}-next +[0-9a-f]{12} +passed +\\S+ +yes +3 `, 'm'));
      const described = await eventually('the RolloutHalted Event under kubectl describe', async () => {
        const out = (await kubectl(['describe', 'sidecartemplate', `${name}-next`])).stdout;
        return /RolloutHalted/.test(out) ? out : undefined;
      });
      t.regex(described, new RegExp(`Warning\\s+RolloutHalted\\s+.*Candidate revision [0-9a-f]{12} of template ${name} is halted`));
      await everyReplica(
        (s) => ((s.rollout.halted ?? []) as Json[]).some((h) => String(h.candidate).startsWith(`${name}@`)),
        'every replica listing the halt in /status',
      );
      // A pod created now gets the stable revision, and runs.
      const after = await kube.create(`/api/v1/namespaces/${namespace}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'after-the-halt', labels },
        spec: onRealNode({ containers: [{ name: 'app', image, command: ['sleep', '3600'] }] }),
      });
      t.false(isCandidate(after), JSON.stringify(after.spec.initContainers));
      await eventually('the pod after the halt Ready on the real node', async () => {
        const pod = await kube.get(`/api/v1/namespaces/${namespace}/pods/after-the-halt`);
        return (pod.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True');
      });
    },
  );

test.serial(
  'an upgrade that leaves the rollout-preflight component out stops the candidate: every pod gets the stable revision, and the candidate’s status says why',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await optedInNamespace(t, 'no-preflight');
    // A candidate at 100 % that a preflight would pass (the test before shows it taking its share).
    await putCandidate('fluent/fluent-bit:3.2.3', 100);
    // `make deploy` with the base alone, as the upgrade line does without KUSTOMIZATION=.
    await deploy();
    await eventually('the Deployment rolled out without --rollout-probe-namespace', async () => {
      const d = await kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
      return !JSON.stringify(d.spec.template.spec.containers[0].args).includes('--rollout-probe-namespace') && d.status?.updatedReplicas === d.spec.replicas;
    });
    await healthyInstall();
    await eventually('only replicas without the preflight', async () => {
      const pods = await injectorPods();
      return pods.length === 2 && pods.every((p) => !JSON.stringify(p.spec.containers[0].args).includes('--rollout-probe-namespace'));
    });
    const images = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, plainPod(`workload-${i}`));
      t.is(answer.status, 201, String(answer.body.message ?? ''));
      images.add(String(shipperImage(answer.body)));
    }
    t.deepEqual([...images], [stableImage], '20 workloads, every one with the stable revision');
    const written = await eventually('the candidate’s status: Stopped, no preflight run', async () => {
      const status = await candidateStatus();
      return status.state === 'Stopped' && (status.conditions as Json[]).some((c) => c.type === 'Halted' && c.reason === 'PreflightNotRun')
        ? status
        : undefined;
    });
    t.regex(String(written.message), /no --rollout-probe-namespace/);
    t.regex((await kubectl(['get', 'sidecartemplates'])).stdout, /^log-shipper-next\s+log-shipper\s+[0-9a-f]{12}\s+candidate\s+100%\s+Stopped\s/m);
  },
);
