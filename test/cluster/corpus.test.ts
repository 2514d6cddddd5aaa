/**
 * Every pod of the corpus (test/fixtures/corpus: real pods from Istio, Linkerd and
 * kubernetes/examples) created through the real API server in an opted-in namespace: stored
 * (so valid), its sidecars once, and a fixed point (the stored pod created again, as a dry run,
 * comes back unchanged). And the test helpers' picture of the API server (test/helpers/apiserver.ts,
 * which the fast suites use to build reviews) against what the real API server sends a webhook
 * for the same pods: wherever they differ, the real one is right.
 */
import test from 'ava';
import { prepareCreate } from '../helpers/apiserver.js';
import { loadCorpus } from '../helpers/corpus.js';
import { createCorpusServiceAccounts, eventually, joinWorld, optedInNamespace, testNamespace, type Json } from './helpers.js';
import { recordingWebhook } from './second-webhook.js';

const corpus = loadCorpus();

/** The corpus pod as a client sends it to `namespace`: its own namespace field dropped. */
function request(body: Json): Json {
  const pod = structuredClone(body);
  delete pod.metadata.namespace;
  return pod;
}

/** A stored pod without what the API server sets on every object (identity, time, history). */
function comparable(pod: Json): Json {
  const { uid: _uid, resourceVersion: _rv, creationTimestamp: _ct, managedFields: _mf, generation: _g, name, ...metadata } = pod.metadata;
  return { metadata: { ...metadata, ...(pod.metadata.generateName ? {} : { name }) }, spec: pod.spec };
}

test('every corpus pod is stored through the real API server with its sidecars once, and created again it is not changed', async (t) => {
  const { kube } = joinWorld();
  const namespace = await optedInNamespace(t, 'corpus');
  await createCorpusServiceAccounts(namespace);
  t.true(corpus.length >= 30);
  for (const { name, body } of corpus) {
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, request(body));
    if (answer.status !== 201) {
      t.fail(`${name}: ${answer.status} ${answer.body.message}`);
      continue;
    }
    const stored = answer.body;
    const names = [...(stored.spec.initContainers ?? []), ...stored.spec.containers].map((c: Json) => c.name);
    t.is(names.length, new Set(names).size, `${name}: every container once`);
    const ledger = stored.metadata.annotations?.['sidecar-injector.io/status'];
    t.truthy(ledger, `${name}: injected (the ledger)`);
    for (const template of Object.keys(JSON.parse(ledger ?? '{"templates":{}}').templates))
      t.true(
        names.some((n) => n === template || n.startsWith(template)),
        `${name}: ${template}'s container is there`,
      );
    // The stored pod sent again (its name free again): the chain (the ServiceAccount plugin,
    // defaulting, both webhooks) changes nothing.
    await kube.delete(`/api/v1/namespaces/${namespace}/pods/${stored.metadata.name}`, { gracePeriodSeconds: 0 });
    await eventually(`${name} gone`, async () => (await kube.find(`/api/v1/namespaces/${namespace}/pods/${stored.metadata.name}`)) === undefined);
    const again = structuredClone(stored);
    for (const field of ['resourceVersion', 'uid', 'creationTimestamp', 'managedFields']) delete again.metadata[field];
    if (again.metadata.generateName) delete again.metadata.name;
    delete again.status;
    const dryRun = await kube.create(`/api/v1/namespaces/${namespace}/pods?dryRun=All`, again);
    t.deepEqual(comparable(dryRun), comparable(stored), `${name}: a fixed point`);
  }
});

test('the helpers that build the fast suites’ reviews send what the real API server sends a webhook', async (t) => {
  const { kube } = joinWorld();
  // Not opted in: the recorder sees each pod as the API server prepares it, untouched by the injector.
  const namespace = await testNamespace(t, 'as-sent');
  await createCorpusServiceAccounts(namespace);
  const recorder = await recordingWebhook(t, namespace);
  const differences: string[] = [];
  for (const { name, body } of corpus) {
    recorder.seen.length = 0;
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, request(body));
    if (answer.status !== 201) {
      t.fail(`${name}: ${answer.status} ${answer.body.message}`);
      continue;
    }
    const sent = recorder.seen[0]!;
    const simulated = prepareCreate(request(body), namespace);
    const normalize = (pod: Json) =>
      JSON.parse(
        JSON.stringify({ metadata: { ...pod.metadata, managedFields: undefined }, spec: pod.spec }).replace(
          /kube-api-access-[a-z0-9]{5}/g,
          'kube-api-access-*',
        ),
      );
    const real = normalize(sent);
    const fake = normalize(simulated);
    for (const line of diff(real, fake, '')) differences.push(`${name}: ${line}`);
  }
  if (differences.length) t.log(differences.join('\n'));
  t.deepEqual(differences, []);
});

/** The paths where `real` and `fake` differ, with both values. */
function diff(real: unknown, fake: unknown, path: string): string[] {
  if (JSON.stringify(real) === JSON.stringify(fake)) return [];
  if (real && fake && typeof real === 'object' && typeof fake === 'object' && Array.isArray(real) === Array.isArray(fake)) {
    const keys = new Set([...Object.keys(real), ...Object.keys(fake)]);
    return [...keys].flatMap((k) => diff((real as Json)[k], (fake as Json)[k], `${path}/${k}`));
  }
  return [`${path}: real ${JSON.stringify(real)}, helpers ${JSON.stringify(fake)}`];
}
