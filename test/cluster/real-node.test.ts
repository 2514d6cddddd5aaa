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
import { cli, eventually, everyReplica, joinWorld, onRealNode, optedInNamespace, testNamespace, withTemplate, type Json } from './helpers.js';

const world = joinWorld();
// joinWorld() refuses a world without the real node: the injector runs only there.
const realNode = world.file.realNode!;
const image = realNode.image;

/** A test template's head: automatic and optional, for the pods labelled `real-node-test: <selector>`, one container of the busybox image. */
const head = (name: string, description: string, selector: string, list: 'initContainers' | 'containers', placement = 'last') => `
name: ${name}
description: ${description}
injection: automatic
placement: ${placement}
failurePolicy: Ignore
objectSelector:
  matchLabels: {real-node-test: ${selector}}
${list}:
  - name: ${name}
    image: ${image}
    imagePullPolicy: IfNotPresent`;

/** A test sidecar's small resources and a restricted securityContext as user `uid` (the container's YAML lines). */
const limitedAndRestricted = (uid: number) => `    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {cpu: 100m, memory: 32Mi}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      runAsUser: ${uid}
      capabilities: {drop: ["ALL"]}
      seccompProfile: {type: RuntimeDefault}`;

/** The log tailer: a native sidecar that reads what the app writes to the shared /var/log/app. */
const tailer = (name: string, selector: string) => `${head(name, "tails the app's log file from a shared emptyDir", selector, 'initContainers')}
    restartPolicy: Always
    command: [sh, -c, "touch /tmp/started; exec tail -n +1 -F /var/log/app/app.log"]
    startupProbe:
      exec: {command: [test, -f, /tmp/started]}
      periodSeconds: 1
${limitedAndRestricted(65534)}
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
const server = (name: string, selector: string, startupCommand = 'wget -q -O /dev/null http://127.0.0.1:15000/hello') => `${head(
  name,
  'serves a file on port 15000 for the app containers',
  selector,
  'initContainers',
  'first',
)}
    restartPolicy: Always
    command: [sh, -c, "echo served-by-${name} > /www/hello && exec httpd -f -p 15000 -h /www"]
    startupProbe:
      exec: {command: [sh, -c, "${startupCommand}"]}
      periodSeconds: 1
      failureThreshold: ${startupCommand === 'exit 1' ? 2 : 30}
    readinessProbe:
      httpGet: {path: /hello, port: 15000}
      periodSeconds: 1
${limitedAndRestricted(101)}
    volumeMounts:
      - {name: ${name}-www, mountPath: /www}
volumes:
  - {name: ${name}-www, emptyDir: {}}
`;

/**
 * The agent: an ordinary container (a pod that runs to completion gets it as a native sidecar)
 * that calls the API server with the pod's service-account token, as an agent reporting to the
 * control plane does: it asks who it is (a SelfSubjectReview, the image's api-whoami, verifying
 * the API server with the pod's CA) and prints the answer.
 */
const agent = (name: string, selector: string) => `${head(name, "asks the API server who it is with the pod's token", selector, 'containers')}
    command: [sh, -c, "api-whoami; trap 'exit 0' TERM; while true; do sleep 1; done"]
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {cpu: 100m, memory: 32Mi}
`;

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

test.serial(
  'injected native sidecars run on the real node beside an app pulled from the world’s registry: ready before the app, sharing its volume and its loopback, stopped after it',
  async (t) => {
    const namespace = await optedInNamespace(t, 'real-native');
    const { tail, serve } = await twoSidecars(t, 'native');
    const created = await world.kube.create(`/api/v1/namespaces/${namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'app', labels: labels('native') },
      // The app's image is pulled from the world's registry (Always: each start asks it).
      spec: onRealNode({
        restartPolicy: 'Never',
        containers: [
          {
            name: 'app',
            image: realNode.pulledImage,
            imagePullPolicy: 'Always',
            command: [...appCommand.slice(0, 2), `${appCommand[2]} && cat /etc/pulled-from`],
          },
        ],
      }),
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
    t.is((await logs(namespace, 'app', 'app')).trim(), `served-by-${serve}\napp-done\nregistry`);
    // The kubelet pulled the app's image from the registry: its image ID is the registry's digest.
    t.regex(statusOf(done, 'app')!.imageID, new RegExp(`^${realNode.pulledImage.replace(/:[^:]*$/, '').replace(/[.]/g, '\\.')}@sha256:[0-9a-f]{64}$`));
    // The tailer read what the app wrote to the shared volume.
    t.true((await logs(namespace, 'app', tail)).includes('app-wrote-this-line'));
    // What a person sees with `kubectl describe pod`: the kubelet starting the sidecars before the app, and stopping them.
    const described = (await world.kubectl(['-n', namespace, 'describe', 'pod', 'app'])).stdout;
    // (Their order is the status's startedAt above: kubectl sorts Events by a time of whole seconds.)
    // The kubelet's words changed after 1.34: `{NAME}: Container started`, before it `Started container NAME`.
    for (const name of [serve, tail, 'app']) t.regex(described, new RegExp(`Started .*(\\{${name}\\}: Container started|Started container ${name}$)`, 'm'));
    t.regex(described, new RegExp(`Killing .*(\\{${tail}\\}: Stopping container|Stopping container ${tail}$)`, 'm'));
  },
);

test.serial(
  'a Job whose pod gets native sidecars completes, its sidecars stopped; so does a CronJob’s Job; an agent container runs there as a native sidecar with its token',
  async (t) => {
    const namespace = await optedInNamespace(t, 'real-job');
    await twoSidecars(t, 'job');
    const agentName = `rn-agent-${Math.random().toString(36).slice(2, 7)}`;
    await withTemplate(t, agentName, agent(agentName, 'job'));
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
      // The agent, an ordinary container in its template, is a native sidecar in a pod that runs to completion.
      t.deepEqual(
        (pod.spec.initContainers as Json[]).filter((c) => c.restartPolicy === 'Always').map((c) => c.name),
        (pod.spec.initContainers as Json[]).map((c) => c.name),
      );
      t.is((pod.spec.initContainers as Json[]).length, 3);
      t.true((pod.spec.initContainers as Json[]).some((c) => c.name === agentName));
      t.deepEqual(
        (pod.spec.containers as Json[]).map((c) => c.name),
        ['work'],
      );
      // It called the API server with the pod's own token: the API server says who that is.
      const said = await logs(namespace, pod.metadata.name, agentName);
      t.is(said.trim(), `system:serviceaccount:${namespace}:default`);
      const work = (pod.status.containerStatuses as Json[]).find((c) => c.name === 'work')!.state.terminated;
      t.is(work.exitCode, 0);
      for (const sidecar of pod.status.initContainerStatuses as Json[]) {
        t.truthy(sidecar.state.terminated, `${job}: ${sidecar.name} stopped`);
        t.true(Date.parse(sidecar.state.terminated.finishedAt) >= Date.parse(work.finishedAt), `${job}: ${sidecar.name} stopped after the work`);
      }
      // The injector's Event is on the pod's Job (the pod did not exist yet when it was admitted), as `kubectl describe job` shows it.
      // It is written after the answer (its subject checked first): it may come a moment after the Job completes.
      const described = await eventually(`the SidecarsInjected Event under kubectl describe job ${job}`, async () => {
        const out = (await world.kubectl(['-n', namespace, 'describe', 'job', job])).stdout;
        return /SidecarsInjected/.test(out) ? out : undefined;
      });
      t.regex(described, /Normal\s+SidecarsInjected\s+.*injected .*rn-serve-\w+@[0-9a-f]{12}/);
    }
  },
);

test.serial('an injected sidecar whose startup probe fails holds the pod unready and its app containers unstarted', async (t) => {
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
  const unhealthy = await eventually('the kubelet’s Unhealthy Event for the startup probe', async () => {
    const events = (await world.kube.get(`/api/v1/namespaces/${namespace}/events?fieldSelector=involvedObject.name%3Dapp`)).items as Json[];
    return events.find((e) => e.reason === 'Unhealthy' && /Startup probe failed/.test(e.message));
  });
  t.is(unhealthy.type, 'Warning');
});

test.serial('a pod whose QoS the injector kept is Guaranteed in the kubelet’s cgroups, limited to the sum of its containers’ limits', async (t) => {
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
  const cgroup = join('/sys/fs/cgroup/memory', realNode.cgroupRoot, 'kubepods', `pod${running.metadata.uid}`);
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

test.serial(
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
      t.is(pod.spec.nodeName, realNode.name);
      const status = statusOf(pod, 'injector')!;
      t.true(status.ready, `${pod.metadata.name} ready`);
      // The image the kubelet pulled is the one pushed: its repository digest.
      t.is(status.imageID, pushed);
      // The container's memory cgroup holds the Deployment's limit (Burstable: under kubepods/burstable).
      const id = (status.containerID as string).replace(/^containerd:\/\//, '');
      const cgroup = join('/sys/fs/cgroup/memory', realNode.cgroupRoot, 'kubepods', 'burstable', `pod${pod.metadata.uid}`, id, 'memory.limit_in_bytes');
      t.is(Number(readFileSync(cgroup, 'utf8')), 256 * 1024 * 1024, cgroup);
      t.is(container.resources.limits.memory, '256Mi');
    }
  },
);

test.serial(
  'where the oldest kubelet predates native sidecars, a native sidecar falls back to an ordinary container, and the pod runs with it on the real node',
  async (t) => {
    const namespace = await optedInNamespace(t, 'real-fallback');
    const name = `rn-serve-${Math.random().toString(36).slice(2, 7)}`;
    await withTemplate(t, name, server(name, 'fallback'));
    const standIn = '/api/v1/nodes/node-1';
    const version = (await world.kube.get(standIn)).status.nodeInfo.kubeletVersion as string;
    const shipperForm = async () => {
      const dry = await world.kube.create(`/api/v1/namespaces/${namespace}/pods?dryRun=All`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'version-probe' },
        spec: { containers: [{ name: 'app', image }] },
      });
      return ((dry.spec.initContainers ?? []) as Json[]).some((c) => c.name === 'log-shipper') ? 'native' : 'container';
    };
    const decided = (minor: string) => (status: Json) => new RegExp(`^v?1\\.${minor}(\\.|$)`).test(String(status.kubernetes?.kubernetesVersion));
    t.teardown(async () => {
      await world.kube.mergePatch(`${standIn}/status`, { status: { nodeInfo: { kubeletVersion: version } } });
      // Both nodes run the control plane's minor again: that is what every replica decides.
      const minor = /^v1\.(\d+)\./.exec(version)![1]!;
      await everyReplica(decided(minor), `every replica deciding 1.${minor} again`);
    });
    // The stand-in node says it runs a kubelet of 1.28: the oldest kubelet decides (docs/cluster.md).
    await world.kube.mergePatch(`${standIn}/status`, { status: { nodeInfo: { kubeletVersion: 'v1.28.15' } } });
    await everyReplica(decided('28'), 'every replica deciding 1.28');
    t.is(await shipperForm(), 'container', 'the log shipper an ordinary container');
    const created = await world.kube.create(`/api/v1/namespaces/${namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'app', labels: labels('fallback') },
      spec: onRealNode({
        // No start order without native sidecars: the app waits for the server itself.
        containers: [{ name: 'app', image, command: ['sh', '-c', 'until wget -q -O- http://127.0.0.1:15000/hello; do sleep 1; done; exec sleep 3600'] }],
      }),
    });
    t.deepEqual(
      (created.spec.containers as Json[]).map((c) => c.name),
      [name, 'app'],
      'the server an ordinary container, placed first',
    );
    t.deepEqual(created.spec.initContainers ?? [], []);
    const ready = await podWhen(
      namespace,
      'app',
      'Ready',
      (p) => (p.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
    );
    t.true((ready.status.containerStatuses as Json[]).every((c) => c.ready === true && c.state.running));
    t.regex(await logs(namespace, 'app', 'app'), new RegExp(`served-by-${name}`));
  },
);

test.serial(
  'audit --restart replaces running pods created before their namespace opted in; the new ones run with their sidecars, and why calls a running pod missing, then current',
  async (t) => {
    const namespace = await testNamespace(t, 'real-audit');
    const { tail, serve } = await twoSidecars(t, 'audit');
    await world.kube.create(`/apis/apps/v1/namespaces/${namespace}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { ...labels('audit'), app: 'web' } },
          spec: onRealNode({
            containers: [
              {
                name: 'app',
                image,
                imagePullPolicy: 'IfNotPresent',
                command: ['sh', '-c', 'mkdir -p /var/log/app; echo app-wrote-this-line >> /var/log/app/app.log; exec sleep 3600'],
              },
            ],
          }),
        },
      },
    });
    const readyPods = (count: number) =>
      eventually(`${count} ready pods of web, no other`, async () => {
        const pods = (await world.kube.get(`/api/v1/namespaces/${namespace}/pods?labelSelector=app%3Dweb`)).items as Json[];
        const ready = pods.filter(
          (p) => !p.metadata.deletionTimestamp && (p.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return pods.length === count && ready.length === count ? ready : undefined;
      });
    const before = await readyPods(2);
    t.true(
      before.every((p) => (p.spec.initContainers ?? []).length === 0),
      'running without sidecars: the namespace was not opted in',
    );
    await world.kube.mergePatch(`/api/v1/namespaces/${namespace}`, { metadata: { labels: { 'sidecar-injector.io/injection': 'enabled' } } });
    const whyPod = async (name: string) => {
      const run = await cli(['why', '-n', namespace, `pod/${name}`, '-o', 'json']);
      t.is(run.code, 0, run.stderr);
      return Object.fromEntries((JSON.parse(run.stdout).templates as Json[]).map((a) => [a.template, a])) as Record<string, Json>;
    };
    const missing = await whyPod(before[0]!.metadata.name);
    t.like(missing[serve], { state: 'missing', fix: `kubectl -n ${namespace} rollout restart deployment/web` });
    t.like(missing[tail], { state: 'missing' });

    const restart = await cli(['audit', '-n', namespace, '--restart', 'missing', '--max-per-minute', '600']);
    t.is(restart.code, 0, restart.stderr);
    t.regex(restart.stdout, /restarted deployment\/web/);
    await world.kubectl(['rollout', 'status', 'deployment/web', '-n', namespace, '--timeout=180s']);
    const after = await readyPods(2);
    for (const pod of after) {
      t.false(
        before.some((p) => p.metadata.uid === pod.metadata.uid),
        'a new pod',
      );
      t.deepEqual(
        (pod.status.initContainerStatuses as Json[]).map((c) => [c.name, c.started, c.ready, Object.keys(c.state)[0]]),
        [
          [serve, true, true, 'running'],
          [tail, true, true, 'running'],
        ],
      );
      t.true((await logs(namespace, pod.metadata.name, tail)).includes('app-wrote-this-line'), 'the tailer reads what the app wrote');
    }
    const injected = await whyPod(after[0]!.metadata.name);
    t.like(injected[serve], { state: 'current' });
    t.like(injected[tail], { state: 'current' });
    const again = await cli(['audit', '-n', namespace, '--restart', 'missing,stale']);
    t.is(again.code, 0, again.stderr);
    t.notRegex(again.stdout, /^restarted /m);
  },
);
