/**
 * The answer cache as serve runs it (src/reviewer.ts), over HTTPS: pods of one ReplicaSet as the
 * API server sends them (defaulted, the token mount, the controller's full managedFields) are
 * answered from the cache from the third on, counted by the metric, logged as the first was, and
 * a template reload is never answered from the old set.
 */
import test from 'ava';
import { createReview, decodePatch, prepareCreate } from '../../../test/helpers/apiserver.js';
import { startTestServer } from '../../../test/helpers/server.js';
import { templateSet } from '../../../test/helpers/templates.js';
import type { TemplateSet } from '../../templates/set.js';

const fromCache = (metrics: string) => Number(/^sidecar_injector_reviews_from_cache_total (\d+)$/m.exec(metrics)?.[1] ?? 'NaN');

test('pods of one ReplicaSet as the API server sends them are answered from the cache, and a reload is not', async (t) => {
  let set: TemplateSet = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const server = await startTestServer({ templates: () => set });
  t.teardown(() => server.stop());
  const body = {
    metadata: { generateName: 'web-5d8f-', labels: { app: 'web', 'pod-template-hash': '5d8f' } },
    spec: { containers: [{ name: 'app', image: 'a:1', ports: [{ containerPort: 8080 }] }] },
  };
  const send = async (n: number) => {
    const review = createReview(prepareCreate(body, 'shop', { managedAt: `2026-11-20T10:00:0${n % 10}Z` }), { namespace: 'shop', uid: `uid-${n}` });
    const sent = JSON.stringify(review);
    // What the API server sends: the controller's field set with escaped `k:` keys.
    if (!sent.includes('"k:{\\"name\\":\\"app\\"}"')) throw new Error('not an API-server-shaped review');
    const { status, json } = await server.post(review);
    t.is(status, 200);
    t.is(json.response.uid, `uid-${n}`);
    return (decodePatch(json.response) as { path: string; value?: { image?: string } }[]).find((op) => op.path.startsWith('/spec/containers'))?.value?.image;
  };
  for (let n = 0; n < 5; n++) t.is(await send(n), 'agent:1');
  t.is(fromCache((await server.request('GET', '/metrics')).text), 3, 'remembered at the second, answered from the cache from the third');
  const lines = server.logs.filter((l) => l.msg === 'review');
  const shared = (l: Record<string, unknown>) => {
    const { uid: _uid, durationMs: _durationMs, time: _time, ...rest } = l;
    return rest;
  };
  t.is(lines.length, 5);
  for (const line of lines) t.deepEqual(shared(line), shared(lines[0]!));
  set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:2' }] });
  t.is(await send(5), 'agent:2');
  t.is(fromCache((await server.request('GET', '/metrics')).text), 3);
});
