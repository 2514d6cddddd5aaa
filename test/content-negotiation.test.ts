/**
 * Content negotiation as the API server does it (CONTRACT.md section 12): the first `Accept`
 * clause it can serve wins, then a single object asked as a List is 406, a list asked as a
 * single object is 406, and a watch asked as a List ends at its first event. The fake API
 * server is held to that, and the client sends the right `Accept` for each kind of read.
 */
import test from 'ava';
import https from 'node:https';
import { KubernetesApiError } from '../src/errors.js';
import { acceptFor, getJson, listAll, metadataOnly } from '../src/kube-api/request.js';
import { FakeApiServer, negotiate } from './helpers/fake-apiserver.js';
import { until } from './helpers/until.js';

const listFirst =
  'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';
const singleFirst =
  'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';

async function fakeApi(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.create('shop', { team: 'a' });
  api.addObject('pods', { namespace: 'shop', name: 'web-1', labels: { app: 'web' } }, { containers: [{ name: 'app', image: 'a' }] });
  api.addObject('replicasets', { namespace: 'shop', name: 'web-5d8f' }, { replicas: 1 });
  return api;
}

test('the first clause the server can serve wins, whatever the request', (t) => {
  t.is(negotiate(listFirst), 'metadataList');
  t.is(negotiate(singleFirst), 'metadata');
  t.is(negotiate('application/json'), 'object');
  t.is(negotiate(undefined), 'object');
  t.is(negotiate('application/vnd.kubernetes.protobuf,application/json'), 'object', 'a form this server does not speak is passed over');
  t.is(negotiate('application/json;as=Table;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1'), 'metadata');
  t.is(negotiate('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta2'), undefined);
  t.is(negotiate('text/html'), undefined);
});

test('a single GET asked as a List is 406, and a list asked as a single object is 406', async (t) => {
  const api = await fakeApi(t);
  const kc = await api.kubeConfig();
  const get = (path: string, accept: string) => raw(kc, path, accept);
  t.is((await get('/api/v1/namespaces/shop', listFirst)).status, 406);
  t.is((await get('/apis/apps/v1/namespaces/shop/replicasets/web-5d8f', listFirst)).status, 406);
  t.is((await get('/api/v1/pods?limit=10', singleFirst)).status, 406);
  t.is((await get('/api/v1/namespaces', singleFirst)).status, 406);
  const single = await get('/api/v1/namespaces/shop', singleFirst);
  t.is(single.status, 200);
  t.like(JSON.parse(single.text), { kind: 'PartialObjectMetadata', metadata: { name: 'shop' } });
  t.is(JSON.parse(single.text).spec, undefined, 'metadata only');
  const list = await get('/api/v1/pods', listFirst);
  t.like(JSON.parse(list.text), { kind: 'PartialObjectMetadataList', items: [{ kind: 'PartialObjectMetadata', metadata: { name: 'web-1' } }] });
  t.like(JSON.parse((await get('/api/v1/namespaces/shop', 'application/json')).text), { kind: 'Namespace', spec: { finalizers: ['kubernetes'] } });
  t.is((await get('/api/v1/namespaces/shop', 'text/html')).status, 406);
});

test('a watch asked as a List ends at its first event; asked as a single object it delivers each one', async (t) => {
  const api = await fakeApi(t);
  const kc = await api.kubeConfig();
  const asList = watch(kc, '/api/v1/pods?watch=true&resourceVersion=0', listFirst);
  const asSingle = watch(kc, '/api/v1/pods?watch=true&resourceVersion=0', singleFirst);
  await until(() => asSingle.lines.length === 1, 'the first event');
  await asList.ended;
  t.deepEqual(asList.lines, [], 'the List form ended the stream at the first event');
  api.addObject('pods', { namespace: 'shop', name: 'web-2' }, { containers: [] });
  await until(() => asSingle.lines.length === 2, 'the second event');
  t.like(JSON.parse(asSingle.lines[1]!), { type: 'ADDED', object: { kind: 'PartialObjectMetadata', metadata: { name: 'web-2' } } });
  asSingle.close();
});

test('the client asks each kind of read in the form it is answered in', async (t) => {
  t.is(acceptFor(metadataOnly, 'list').split(',')[0], 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1');
  t.is(acceptFor(metadataOnly, 'get').split(',')[0], 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1');
  t.is(acceptFor(metadataOnly, 'watch'), acceptFor(metadataOnly, 'get'));
  t.is(acceptFor('object', 'list'), 'application/json');
  const api = await fakeApi(t);
  const kc = await api.kubeConfig();
  t.like(await getJson(kc, '/api/v1/namespaces/shop', 5000, metadataOnly), { kind: 'PartialObjectMetadata', metadata: { name: 'shop' } });
  t.like(await getJson(kc, '/apis/apps/v1/namespaces/shop/replicasets/web-5d8f', 5000, metadataOnly), { kind: 'PartialObjectMetadata' });
  const { items } = await listAll<{ kind: string }>(kc, '/api/v1/pods', { accept: metadataOnly });
  t.deepEqual(
    items.map((i) => i.kind),
    ['PartialObjectMetadata'],
  );
  t.deepEqual(api.notAcceptable, []);
  // The client reports a 406 as one, with the path.
  const refused = await t.throwsAsync(raw406(kc));
  t.true(refused instanceof KubernetesApiError);
});

/** A GET that makes the fake answer 406, through the client (a List Accept on one object). */
async function raw406(kc: Awaited<ReturnType<FakeApiServer['kubeConfig']>>): Promise<unknown> {
  return getJson(kc, '/api/v1/namespaces/shop', 5000, metadataOnly, 'list');
}

/** One raw GET with an `Accept` of the test's choosing. */
async function raw(kc: Awaited<ReturnType<FakeApiServer['kubeConfig']>>, path: string, accept: string): Promise<{ status: number; text: string }> {
  const options: https.RequestOptions = { headers: { accept } };
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    https
      .get(new URL(kc.getCurrentCluster()!.server + path), options, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      })
      .on('error', reject);
  });
}

/** A raw watch: its lines as they come, and when the server ends it. */
function watch(kc: Awaited<ReturnType<FakeApiServer['kubeConfig']>>, path: string, accept: string) {
  const lines: string[] = [];
  let req: ReturnType<typeof https.get> | undefined;
  const ended = new Promise<void>((resolve, reject) => {
    const options: https.RequestOptions = { headers: { accept } };
    void kc.applyToHTTPSOptions(options).then(() => {
      req = https.get(new URL(kc.getCurrentCluster()!.server + path), options, (res) => {
        let buffered = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          buffered += c;
          const parts = buffered.split('\n');
          buffered = parts.pop()!;
          lines.push(...parts.filter(Boolean));
        });
        res.on('end', () => resolve());
        res.on('error', () => resolve());
      });
      req.on('error', reject);
    }, reject);
  });
  return { lines, ended, close: () => req?.destroy() };
}
