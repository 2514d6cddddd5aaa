/**
 * Sidecars that run: pods injected through the real admission chain and then run by the
 * world's real node (a kubelet with containerd and runc, test/cluster/world/real-node.ts).
 *
 * The test templates have the shapes of the bundled examples (a log tailer sharing
 * /var/log/app with the app containers, a loopback server with probes) with the busybox image
 * the world built, since no image outside can be pulled here. What the kubelet does with the
 * pods (start order, probes, shared volumes, Job completion, cgroups) is read back from the pod's
 * status, its containers' logs through the API server, and the kubelet's cgroups.
 */
import test, { type ExecutionContext } from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, joinWorld, optedInNamespace, withTemplate, type Json } from './helpers.js';
import { realNodeTaint } from './world/real-node.js';

const world = joinWorld();
const realNode = world.file.realNode;
/** Without the real node (SIDECAR_INJECTOR_REAL_NODE=off) these tests are skipped, saying so. */
const realTest = realNode ? test.serial : test.serial.skip;
const image = realNode?.image ?? 'sidecar-injector.test/busybox:1';

/** The log tailer: a native sidecar that reads what the app writes to the shared /var/log/app. */
const tailer = (name: string, selector: string) => `
name: ${name}
description: tails the app's log file from a shared emptyDir
injection: automatic
placement: last
failurePolicy: Ignore
objectSelector:
  matchLabels: {real-node-test: ${selector}}
initContainers:
  - name: ${name}
    image: ${image}
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: [sh, -c, "touch /tmp/started; exec tail -n +1 -F /var/log/app/app.log"]
    startupProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {cpu: 100m, memory: 32Mi}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      runAsUser: 65534
      capabilities: {drop: ["ALL"]}
      seccompProfile: {type: RuntimeDefault}
    volumeMounts:
      - {name: ${name}-logs, mountPath: /var/log/app, readOnly: true}
      - {name: ${name}-tmp, mountPath: /tmp}
volumes:
  - {name: ${name}-logs, emptyDir: {}}
  - {name: ${name}-tmp, emptyDir: {}}
appContainers:
  volumeMounts:
    - {name: ${name}-logs, mountPath: /var/log/app}
`;

/** The loopback server: a native sidecar that serves on port 15000, ready once it answers. */
const server = (name: string, selector: string, startupCommand = 'wget -q -O /dev/null http://127.0.0.1:15000/hello') => `
name: ${name}
description: serves a file on port 15000 for the app containers
injection: automatic
placement: first
failurePolicy: Ignore
objectSelector:
  matchLabels: {real-node-test: ${selector}}
initContainers:
  - name: ${name}
    image: ${image}
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: [sh, -c, "echo served-by-${name} > /www/hello && exec httpd -f -p 15000 -h /www"]
    startupProbe:
      exec: {command: [sh, -c, "${startupCommand}"]}
      periodSeconds: 1
      failureThreshold: 2
    readinessProbe:
      httpGet: {path: /hello, port: 15000}
      periodSeconds: 1
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {cpu: 100m, memory: 32Mi}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      runAsUser: 101
      capabilities: {drop: ["ALL"]}
      seccompProfile: {type: RuntimeDefault}
    volumeMounts:
      - {name: ${name}-www, mountPath: /www}
volumes:
  - {name: ${name}-www, emptyDir: {}}
`;

/** A pod spec's part that puts it on the real node: the node by name (no scheduler here), its taint tolerated, a short grace. */
function onRealNode(spec: Json): Json {
  return {
    nodeName: realNode?.name ?? 'real-node',
    tolerations: [{ key: realNodeTaint.key, operator: 'Equal', value: realNodeTaint.value, effect: realNodeTaint.effect }],
    terminationGracePeriodSeconds: 2,
    ...spec,
  };
}

/** The app: writes a line the tailer reads, reads what the server serves on loopback (once, no retry), then ends. */
const appCommand = ['sh', '-c', 'echo app-wrote-this-line >> /var/log/app/app.log && wget -q -O- http://127.0.0.1:15000/hello && sleep 2 && echo app-done'];

/** The pod's labels: the test's templates, and the bundled log shipper kept out (its image cannot be pulled here). */
const labels = (selector: string) => ({ 'real-node-test': selector, 'logging.example.com/ship': 'false' });

const statusOf = (pod: Json, name: string): Json | undefined =>
  [...((pod.status?.initContainerStatuses ?? []) as Json[]), ...((pod.status?.containerStatuses ?? []) as Json[])].find((c) => c.name === name);

async function logs(namespace: string, pod: string, container: string): Promise<string> {
  return (await world.kubectl(['-n', namespace, 'logs', pod, '-c', container])).stdout;
}

async function podWhen(namespace: string, name: string, what: string, holds: (pod: Json) => boolean): Promise<Json> {
  return eventually(`${namespace}/${name}: ${what}`, async () => {
    const pod = await world.kube.get(`/api/v1/namespaces/${namespace}/pods/${name}`);
    return holds(pod) ? pod : undefined;
  });
}

async function twoSidecars(t: ExecutionContext, selector: string): Promise<{ tail: string; serve: string }> {
  const suffix = Math.random().toString(36).slice(2, 7);
  const names = { tail: `rn-tail-${suffix}`, serve: `rn-serve-${suffix}` };
  await withTemplate(t, names.tail, tailer(names.tail, selector));
  await withTemplate(t, names.serve, server(names.serve, selector));
  return names;
}

realTest('injected native sidecars run on the real node: ready before the app, sharing its volume and its loopback, stopped after it', async (t) => {
  const namespace = await optedInNamespace(t, 'real-native');
  const { tail, serve } = await twoSidecars(t, 'native');
  const created = await world.kube.create(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app', labels: labels('native') },
    spec: onRealNode({ restartPolicy: 'Never', containers: [{ name: 'app', image, imagePullPolicy: 'IfNotPresent', command: appCommand }] }),
  });
  // Injected as native sidecars: the server first, the tailer last, both restartable init containers.
  t.deepEqual(
    (created.spec.initContainers as Json[]).map((c) => [c.name, c.restartPolicy]),
    [
      [serve, 'Always'],
      [tail, 'Always'],
    ],
  );
  const done = await podWhen(namespace, 'app', 'Succeeded or Failed', (pod) => pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed');
  t.is(done.status.phase, 'Succeeded', JSON.stringify(done.status));

  const app = statusOf(done, 'app')!.state.terminated;
  t.is(app.exitCode, 0);
  for (const name of [serve, tail]) {
    const sidecar = statusOf(done, name)!;
    // Started no later than the app, ended no earlier (the kubelet stops sidecars after the app containers).
    t.true(Date.parse(sidecar.state.terminated.startedAt) <= Date.parse(app.startedAt), `${name} started before the app`);
    t.true(Date.parse(sidecar.state.terminated.finishedAt) >= Date.parse(app.finishedAt), `${name} stopped after the app`);
    t.is(sidecar.restartCount, 0);
  }
  // The app read the server on loopback at its first try: the server was up before the app started.
  t.is((await logs(namespace, 'app', 'app')).trim(), `served-by-${serve}\napp-done`);
  // The tailer read what the app wrote to the shared volume.
  t.true((await logs(namespace, 'app', tail)).includes('app-wrote-this-line'));
  // What a person sees with `kubectl describe pod`: the kubelet starting the sidecars before the app, and stopping them.
  const described = (await world.kubectl(['-n', namespace, 'describe', 'pod', 'app'])).stdout;
  const started = [serve, tail, 'app'].map((name) => described.search(new RegExp(`Started .*\\{${name}\\}: Container started`)));
  t.true(started.every((at) => at >= 0) && started[0]! < started[1]! && started[1]! < started[2]!, described);
  t.regex(described, new RegExp(`Killing .*\\{${tail}\\}: Stopping container`));
});

realTest('a Job whose pod gets native sidecars completes, its sidecars stopped; so does a CronJob’s Job', async (t) => {
  const namespace = await optedInNamespace(t, 'real-job');
  await twoSidecars(t, 'job');
  const podTemplate = {
    metadata: { labels: labels('job') },
    spec: onRealNode({ restartPolicy: 'Never', containers: [{ name: 'work', image, imagePullPolicy: 'IfNotPresent', command: appCommand }] }),
  };
  await world.kube.create(`/apis/batch/v1/namespaces/${namespace}/jobs`, {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'batch' },
    spec: { backoffLimit: 0, template: podTemplate },
  });
  await world.kube.create(`/apis/batch/v1/namespaces/${namespace}/cronjobs`, {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: 'nightly' },
    spec: { schedule: '0 3 * * *', jobTemplate: { spec: { backoffLimit: 0, template: podTemplate } } },
  });
  // The CronJob's Job, as `kubectl create job --from=cronjob/…` makes it (no waiting for 03:00).
  await world.kubectl(['-n', namespace, 'create', 'job', 'nightly-now', '--from=cronjob/nightly']);
  for (const job of ['batch', 'nightly-now']) {
    const finished = await eventually(`Job ${job} finished`, async () => {
      const j = await world.kube.get(`/apis/batch/v1/namespaces/${namespace}/jobs/${job}`);
      return (j.status?.conditions as Json[] | undefined)?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    });
    t.is(finished.type, 'Complete', `Job ${job}: ${JSON.stringify(finished)}`);
    const pods = (await world.kube.get(`/api/v1/namespaces/${namespace}/pods?labelSelector=job-name%3D${job}`)).items as Json[];
    t.is(pods.length, 1);
    const pod = pods[0]!;
    t.is(pod.status.phase, 'Succeeded');
    t.is((pod.spec.initContainers as Json[]).length, 2);
    for (const sidecar of pod.status.initContainerStatuses as Json[]) t.truthy(sidecar.state.terminated, `${job}: ${sidecar.name} stopped`);
    // The injector's Event is on the pod's Job (the pod did not exist yet when it was admitted), as `kubectl describe job` shows it.
    t.regex((await world.kubectl(['-n', namespace, 'describe', 'job', job])).stdout, /Normal\s+SidecarsInjected\s+.*injected rn-serve-/);
  }
});

realTest('an injected sidecar whose startup probe fails holds the pod unready and its app containers unstarted', async (t) => {
  const namespace = await optedInNamespace(t, 'real-probe');
  const name = `rn-never-${Math.random().toString(36).slice(2, 7)}`;
  await withTemplate(t, name, server(name, 'never-starts', 'exit 1'));
  await world.kube.create(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app', labels: labels('never-starts') },
    spec: onRealNode({ containers: [{ name: 'app', image, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'] }] }),
  });
  // The kubelet restarts a sidecar whose startup probe failed: wait for that, then look.
  const pod = await podWhen(namespace, 'app', 'the sidecar restarted after its startup probe failed', (p) => (statusOf(p, name)?.restartCount ?? 0) >= 1);
  t.is(statusOf(pod, name)!.started, false);
  t.truthy(statusOf(pod, 'app')!.state.waiting, JSON.stringify(statusOf(pod, 'app')));
  t.is((pod.status.conditions as Json[]).find((c) => c.type === 'Ready')!.status, 'False');
  const events = (await world.kube.get(`/api/v1/namespaces/${namespace}/events?fieldSelector=involvedObject.name%3Dapp`)).items as Json[];
  t.true(
    events.some((e) => e.reason === 'Unhealthy' && /Startup probe failed/.test(e.message)),
    events.map((e) => `${e.reason}: ${e.message}`).join('\n'),
  );
});

realTest('a pod whose QoS the injector kept is Guaranteed in the kubelet’s cgroups, limited to the sum of its containers’ limits', async (t) => {
  const namespace = await optedInNamespace(t, 'real-qos');
  await twoSidecars(t, 'qos');
  const resources = { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } };
  const created = await world.kube.create(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app', labels: labels('qos') },
    spec: onRealNode({ containers: [{ name: 'app', image, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'], resources }] }),
  });
  t.is(created.status?.qosClass, 'Guaranteed');
  const running = await podWhen(
    namespace,
    'app',
    'Ready',
    (p) => (p.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
  );
  t.is(running.status.qosClass, 'Guaranteed');
  // A Guaranteed pod's cgroup sits right under kubepods (Burstable and BestEffort ones one level down).
  const cgroup = join('/sys/fs/cgroup/memory/kubepods', `pod${running.metadata.uid}`);
  t.true(existsSync(cgroup), `${cgroup} exists`);
  const mebibytes = (q: string) => Number(/^(\d+)Mi$/.exec(q)![1]) * 1024 * 1024;
  const limits = [...(running.spec.initContainers as Json[]), ...(running.spec.containers as Json[])].map((c) => {
    t.is(c.resources.requests.memory, c.resources.limits.memory, `${c.name}: requests equal limits`);
    return mebibytes(c.resources.limits.memory);
  });
  t.is(
    Number(readFileSync(join(cgroup, 'memory.limit_in_bytes'), 'utf8')),
    limits.reduce((a, b) => a + b, 0),
  );
});

/** The injector's own replicas run on the real node only when the world had a fresh image to push (make image). */
const installTest = world.file.containers === 'real-node' ? test.serial : test.serial.skip;

installTest(
  'the injector’s replicas run on the real node from the image make push published, pulled by digest, within their Deployment’s memory limit',
  async (t) => {
    const pushed = readFileSync(world.file.deploy.digestFile, 'utf8').trim();
    const deployment = await world.kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
    const container = deployment.spec.template.spec.containers[0];
    t.is(container.image, pushed);
    const pods = (
      (await world.kube.get('/api/v1/namespaces/sidecar-injector/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dwebhook')).items as Json[]
    ).filter((p) => !p.metadata.deletionTimestamp);
    t.is(pods.length, deployment.spec.replicas);
    for (const pod of pods) {
      t.is(pod.spec.nodeName, realNode!.name);
      const status = statusOf(pod, 'injector')!;
      t.true(status.ready, `${pod.metadata.name} ready`);
      // The image the kubelet pulled is the one pushed: its repository digest.
      t.is(status.imageID, pushed);
      // The container's memory cgroup holds the Deployment's limit (Burstable: under kubepods/burstable).
      const id = (status.containerID as string).replace(/^containerd:\/\//, '');
      const cgroup = join('/sys/fs/cgroup/memory/kubepods/burstable', `pod${pod.metadata.uid}`, id, 'memory.limit_in_bytes');
      t.is(Number(readFileSync(cgroup, 'utf8')), 256 * 1024 * 1024, cgroup);
      t.is(container.resources.limits.memory, '256Mi');
    }
  },
);
