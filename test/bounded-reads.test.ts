/**
 * Reads of tenant-writable collections, bounded: a list page past its byte bound is asked for
 * again with fewer items, one object past it is an error, never a heap; and the workloads that
 * `FailedCreate` Events name are taken round the namespaces, so that one namespace's forged
 * Events cannot crowd out another's evidence.
 */
import test from 'ava';
import { ResponseTooLargeError } from '../src/errors.js';
import { getJson, listPages } from '../src/kube-api/request.js';
import { refusedWorkloads, roundTheNamespaces } from '../src/rollout/refusals.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';

const now = Date.UTC(2026, 10, 27, 10, 0, 0);
const mib = 1024 * 1024;

function failedCreate(namespace: string, name: string, kind: string, involved: string, message: string, about = namespace): Record<string, any> {
  return {
    kind: 'Event',
    apiVersion: 'v1',
    metadata: { namespace, name },
    involvedObject: { kind, namespace: about, name: involved },
    reason: 'FailedCreate',
    type: 'Warning',
    message,
    lastTimestamp: new Date(now - 60_000).toISOString(),
  };
}

test('a page past its byte bound is asked for again with half the items, down to what fits; every item still comes', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  for (let i = 0; i < 20; i++) api.coreEvents.push(failedCreate('shop', `big-${i}`, 'Job', `job-${i}`, 'x'.repeat(mib)));
  const seen: string[] = [];
  let largest = 0;
  await listPages<Record<string, any>>(await api.kubeConfig(), '/api/v1/events', { pageSize: 500, maxPageBytes: 4 * mib }, (page) => {
    largest = Math.max(largest, Buffer.byteLength(JSON.stringify(page)));
    for (const e of page) seen.push(e.metadata.name);
  });
  t.deepEqual(
    seen,
    Array.from({ length: 20 }, (_, i) => `big-${i}`),
  );
  t.true(largest <= 4 * mib, `every page within its bound (largest ${largest} bytes)`);
  t.deepEqual(api.listLimits.slice(0, 8), ['500', '250', '125', '62', '31', '15', '7', '3']);
});

test('one object past the bound of a page fails the list with a typed error; one past the bound of a read fails the read', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.coreEvents.push(failedCreate('shop', 'huge', 'Job', 'job', 'x'.repeat(2 * mib)));
  const kubeConfig = await api.kubeConfig();
  const error = await t.throwsAsync(
    listPages(kubeConfig, '/api/v1/events', { maxPageBytes: mib }, () => undefined),
    {
      instanceOf: ResponseTooLargeError,
    },
  );
  t.is(error.code, 'ERR_RESPONSE_TOO_LARGE');
  t.regex(error.message, /^\/api\/v1\/events\?limit=1: the answer is larger than 1048576 bytes$/);
  await t.throwsAsync(getJson(kubeConfig, '/api/v1/events', 10_000, 'object', 'list', mib), { instanceOf: ResponseTooLargeError });
  // The server is still there for the next read.
  t.is(((await getJson(kubeConfig, '/api/v1/events?limit=1', 10_000, 'object', 'list')) as { items: unknown[] }).items.length, 1);
});

test('forged FailedCreate Events in a namespace that lists first cannot crowd out the StatefulSets a candidate broke in another', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  // A tenant's namespace sorts first: 200 Events naming Jobs that do not exist, and 100 with 1 MiB messages.
  for (let i = 0; i < 200; i++) api.coreEvents.push(failedCreate('aaa-tenant', `forged-${i}`, 'Job', `ghost-${i}`, 'forged'));
  for (let i = 0; i < 100; i++) api.coreEvents.push(failedCreate('aaa-tenant', `heavy-${i}`, 'Job', `heavy-${i}`, 'x'.repeat(mib)));
  // Names no object could have are not followed at all.
  api.coreEvents.push(failedCreate('aaa-tenant', 'odd', 'Job', `${'n'.repeat(300)}`, 'forged'));
  api.coreEvents.push(failedCreate('__proto__', 'odd-ns', 'Job', 'x', 'forged'));
  for (const name of ['db', 'cache', 'queue']) {
    api.addObject('statefulsets', { namespace: 'shop', name }, { template: { metadata: { labels: { app: name } } } });
    api.coreEvents.push(failedCreate('shop', `${name}.1`, 'StatefulSet', name, `create Pod ${name}-0 in StatefulSet ${name} failed: denied`));
  }
  const refused = await refusedWorkloads(await api.kubeConfig(), { now });
  t.deepEqual(
    refused.map((w) => `${w.kind} ${w.namespace}/${w.name}`),
    ['StatefulSet shop/db', 'StatefulSet shop/cache', 'StatefulSet shop/queue'],
  );
  // Five of the tenant's names were read (its own share), three of shop's: eight reads, not two hundred.
  const reads = api.objectGets.filter((p) => p.startsWith('/apis/'));
  t.is(reads.filter((p) => p.includes('/namespaces/aaa-tenant/')).length, 5);
  t.is(reads.filter((p) => p.includes('/namespaces/shop/')).length, 3);
  t.false(
    reads.some((p) => p.includes('__proto__') || p.includes('nnnn')),
    'no read for names an object could not have',
  );
});

test('every kind whose controller creates pods counts: a ReplicationController refused is read from the core API; a kind that creates none (a Deployment) is not followed', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.addObject('replicationcontrollers', { namespace: 'legacy', name: 'web' }, { template: { metadata: { labels: { app: 'web' } } } });
  api.coreEvents.push(failedCreate('legacy', 'web.1', 'ReplicationController', 'web', 'Error creating: pods "web-x" is forbidden: denied'));
  api.addObject('deployments', { namespace: 'legacy', name: 'api' }, { template: { metadata: { labels: { app: 'api' } } } });
  api.coreEvents.push(failedCreate('legacy', 'api.1', 'Deployment', 'api', 'forged: a Deployment creates no pods'));
  const refused = await refusedWorkloads(await api.kubeConfig(), { now });
  t.deepEqual(
    refused.map((w) => `${w.kind} ${w.namespace}/${w.name}`),
    ['ReplicationController legacy/web'],
  );
  t.deepEqual(api.objectGets, ['/api/v1/namespaces/legacy/replicationcontrollers/web']);
});

test('round the namespaces: each namespace’s first workload, then each one’s second, up to the bound', (t) => {
  const named = (ns: string, n: number) =>
    new Map(Array.from({ length: n }, (_, i) => [`Job/${ns}-${i}`, { kind: 'Job', namespace: ns, name: `${ns}-${i}`, message: '' }] as const));
  const byNamespace = new Map([
    ['a', named('a', 5)],
    ['b', named('b', 1)],
    ['c', named('c', 2)],
  ]);
  t.deepEqual(
    roundTheNamespaces(byNamespace, 5).map((w) => w.name),
    ['a-0', 'b-0', 'c-0', 'a-1', 'c-1'],
  );
  t.is(roundTheNamespaces(byNamespace, 100).length, 8);
  t.deepEqual(roundTheNamespaces(new Map(), 10), []);
});

test("Events written in one namespace about another namespace's workloads are not counted and use none of its slots", async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.addObject('statefulsets', { namespace: 'victim', name: 'db' }, { template: { metadata: { labels: { app: 'db' } } } });
  // A tenant's namespace that lists first writes Events naming workloads in victim (real and not).
  for (let i = 0; i < 5; i++) api.coreEvents.push(failedCreate('aaa', `forged-${i}`, 'StatefulSet', `ghost-${i}`, 'forged', 'victim'));
  api.coreEvents.push(failedCreate('aaa', 'forged-db', 'StatefulSet', 'db', 'forged', 'victim'));
  api.coreEvents.push(failedCreate('victim', 'db.1', 'StatefulSet', 'db', 'create Pod db-0 in StatefulSet db failed: denied'));
  const refused = await refusedWorkloads(await api.kubeConfig(), { now });
  t.deepEqual(
    refused.map((w) => `${w.namespace}/${w.name}: ${w.message}`),
    ['victim/db: create Pod db-0 in StatefulSet db failed: denied'],
  );
  t.deepEqual(
    api.objectGets.filter((p) => p.startsWith('/apis/')),
    ['/apis/apps/v1/namespaces/victim/statefulsets/db'],
  );
});

test('a few large objects cost a few small pages: the page size grows back after each page that fits', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  for (let i = 0; i < 3; i++) api.coreEvents.push(failedCreate('shop', `big-${i}`, 'Job', `job-${i}`, 'x'.repeat(1_400_000)));
  for (let i = 0; i < 2000; i++) api.coreEvents.push(failedCreate('shop', `small-${i}`, 'Job', `job-${i}`, 'small'));
  let items = 0;
  await listPages(await api.kubeConfig(), '/api/v1/events', { pageSize: 500, maxPageBytes: 4 * mib }, (page) => (items += page.length));
  t.is(items, 2003);
  t.true(api.listLimits.length < 30, `${api.listLimits.length} requests: ${api.listLimits.join(',')}`);
  t.is(api.listLimits.at(-1), '500', 'back to the full page size');
});
