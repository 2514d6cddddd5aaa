/**
 * The leader's template conditions on the real API server: written as the templates say and
 * kept through a re-apply of the manifests; turned off (`--match-conditions off`), removed by a
 * strategic merge delete the API server honours, and every pod is sent again (the calls counted
 * from the audit log); turned on again, written back.
 */
import test from 'ava';
import { loadCorpus } from '../helpers/corpus.js';
import {
  auditEvents,
  createCorpusServiceAccounts,
  deploy,
  eventually,
  injectorPods,
  joinWorld,
  optedInNamespace,
  plainPod,
  setInjectorEnv,
  templateConditionsWritten,
  type Json,
} from './helpers.js';

const corpus = loadCorpus();

/**
 * Every corpus pod as a client sends it, and in two more shapes: asking for the proxy (both
 * webhooks inject), and saying logging.example.com/ship=false (no template applies).
 */
function corpusShapes(): { name: string; pod: Json }[] {
  const out: { name: string; pod: Json }[] = [];
  for (const { name, body } of corpus) {
    const pod = structuredClone(body);
    delete pod.metadata.namespace;
    out.push({ name, pod });
    const asking = structuredClone(pod);
    asking.metadata.annotations = { ...(asking.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
    out.push({ name: `${name} asking for the proxy`, pod: asking });
    const none = structuredClone(pod);
    none.metadata.labels = { ...(none.metadata.labels ?? {}), 'logging.example.com/ship': 'false' };
    out.push({ name: `${name} that no template applies to`, pod: none });
  }
  return out;
}

/** The stored pod without what differs between two creates of it (identity, time, the namespace field, the token volume's random suffix). */
function comparable(pod: Json): string {
  const { uid: _u, resourceVersion: _r, creationTimestamp: _c, managedFields: _m, namespace: _n, name, ...metadata } = pod.metadata;
  const text = JSON.stringify({ metadata: { ...metadata, ...(pod.metadata.generateName ? {} : { name }) }, spec: pod.spec });
  return text.replace(/kube-api-access-[a-z0-9]{5}/g, 'kube-api-access-*');
}

/** Each corpus shape created as a dry run in `namespace`: the stored pods (comparable), and the webhook calls the creates took. */
async function throughTheChain(namespace: string): Promise<{ stored: Map<string, string>; calls: number; creates: number }> {
  const { kube } = joinWorld();
  const before = auditEvents().length;
  const stored = new Map<string, string>();
  for (const { name, pod } of corpusShapes()) {
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, pod);
    stored.set(
      name,
      answer.status === 201
        ? comparable(answer.body).replaceAll(namespace, '<namespace>')
        : `refused ${answer.status}: ${String(answer.body.message).replaceAll(namespace, '<namespace>')}`,
    );
  }
  const creates = await eventually('every create in the audit log', () => {
    const found = auditEvents()
      .slice(before)
      .filter(
        (e) =>
          e.verb === 'create' &&
          e.objectRef?.resource === 'pods' &&
          !e.objectRef?.subresource &&
          e.objectRef?.namespace === namespace &&
          String(e.requestURI).includes('dryRun=All'),
      );
    return found.length === stored.size ? found : undefined;
  });
  const calls = creates.reduce(
    (n, e) =>
      n +
      Object.entries((e.annotations ?? {}) as Record<string, string>).filter(
        ([key, value]) => key.startsWith('mutation.webhook.admission.k8s.io/') && value.includes('"configuration":"sidecar-injector"'),
      ).length,
    0,
  );
  return { stored, calls, creates: creates.length };
}

const configurationPath = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector';

/** Each pod webhook's condition names, in the stored order. */
async function conditionNames(): Promise<Record<string, string[]>> {
  const configuration = await joinWorld().kube.get(configurationPath);
  return Object.fromEntries(
    (configuration.webhooks as Json[]).slice(0, 2).map((w) => [w.name as string, ((w.matchConditions ?? []) as Json[]).map((c) => c.name as string).sort()]),
  );
}

/** Sets (or removes, null) `serve --match-conditions` on both replicas. */
const setMatchConditions = (value: 'off' | null) => setInjectorEnv('SIDECAR_INJECTOR_MATCH_CONDITIONS', value);

/** The sidecar-injector webhook calls of the one pod create in `namespace`, as round:webhook. */
function callsOfTheCreateIn(namespace: string): string[] {
  const creates = auditEvents().filter(
    (e) =>
      e.verb === 'create' &&
      e.objectRef?.resource === 'pods' &&
      !e.objectRef?.subresource &&
      e.objectRef?.namespace === namespace &&
      e.responseStatus?.code === 201 &&
      !String(e.requestURI).includes('dryRun'),
  );
  if (creates.length !== 1) throw new Error(`${creates.length} pod creates in ${namespace}`);
  return Object.entries((creates[0]!.annotations ?? {}) as Record<string, string>)
    .filter(([key, value]) => key.startsWith('mutation.webhook.admission.k8s.io/') && value.includes('"configuration":"sidecar-injector"'))
    .map(([key, value]) => `${/round_(\d+)/.exec(key)![1]}:${(JSON.parse(value) as Json).webhook}`);
}

test.serial(
  'the leader keeps its condition through a re-apply of the manifests; turned off, it removes it and every pod is sent; turned on, it writes it back',
  async (t) => {
    const { kube } = joinWorld();
    const both = {
      'required.sidecar-injector.io': ['a-template-may-apply', 'not-a-mirror-pod'],
      'optional.sidecar-injector.io': ['a-template-may-apply', 'not-a-mirror-pod'],
    };
    const mirrorOnly = { 'required.sidecar-injector.io': ['not-a-mirror-pod'], 'optional.sidecar-injector.io': ['not-a-mirror-pod'] };
    t.teardown(async () => {
      await setMatchConditions(null);
      await templateConditionsWritten();
    });
    await templateConditionsWritten();
    t.deepEqual(await conditionNames(), both);
    // kubectl apply -k of the same manifests: the entry is not in them, another manager owns it; it stays.
    await deploy();
    t.deepEqual(await conditionNames(), both, 'a re-apply leaves the leader’s entry');

    // Turned off: the leader's strategic merge delete removes its entry only.
    await setMatchConditions('off');
    await eventually('the entries removed', async () => JSON.stringify(await conditionNames()) === JSON.stringify(mirrorOnly));
    const leaderStatus = await eventually('the leader saying why', async () => {
      for (const pod of await injectorPods()) {
        const status = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8443/proxy/status`);
        if (status['webhook-conditions']?.everyPodSentTo?.Fail === 'turned-off') return status['webhook-conditions'] as Json;
      }
      return undefined;
    });
    t.deepEqual(leaderStatus.everyPodSentTo, { Fail: 'turned-off', Ignore: 'turned-off' });
    // A typical pod now reaches the required webhook too, which adds nothing: three calls.
    const off = await optedInNamespace(t, 'conditions-off');
    await createCorpusServiceAccounts(off);
    const sentEverything = await throughTheChain(off);
    t.is((await kube.request('POST', `/api/v1/namespaces/${off}/pods`, plainPod('typical'))).status, 201);
    t.deepEqual(await eventually('the create in the audit log', () => callsOfTheCreateIn(off)), [
      '0:required.sidecar-injector.io',
      '0:optional.sidecar-injector.io',
      '1:required.sidecar-injector.io',
    ]);

    // On again: written back, and the same pod takes one call.
    await setMatchConditions(null);
    await templateConditionsWritten();
    t.deepEqual(await conditionNames(), both);
    const on = await optedInNamespace(t, 'conditions-on');
    await createCorpusServiceAccounts(on);
    const sentWhatApplies = await throughTheChain(on);
    // The same stored pod for every shape, with fewer calls.
    for (const [name, stored] of sentEverything.stored) t.is(sentWhatApplies.stored.get(name), stored, name);
    t.is(sentWhatApplies.creates, sentEverything.creates);
    t.true(sentWhatApplies.calls < sentEverything.calls, `${sentWhatApplies.calls} calls with the conditions, ${sentEverything.calls} without`);
    t.log(
      `${sentEverything.creates} corpus creates (dry run): ${sentEverything.calls} webhook calls without the conditions, ${sentWhatApplies.calls} with them; every stored pod the same`,
    );
    t.is((await kube.request('POST', `/api/v1/namespaces/${on}/pods`, plainPod('typical'))).status, 201);
    t.deepEqual(await eventually('the create in the audit log', () => callsOfTheCreateIn(on)), ['0:optional.sidecar-injector.io']);
  },
);
