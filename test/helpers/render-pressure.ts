/**
 * Run as a script under a capped heap (`node --max-old-space-size=…`): admits `count` pods whose
 * referenced annotation holds a distinct value of `size` characters, then prints the render
 * cache's size and the heap in use as JSON. Shows that distinct values cannot pin memory.
 */
import { admitPod } from '../../src/pipeline/admit.js';
import { createLocalNamespaceSource } from '../../src/namespaces/source.js';
import { renderCacheSize } from '../../src/templates/render.js';
import { templateSet } from './templates.js';

const [count, size] = process.argv.slice(2).map(Number) as [number, number];
const set = templateSet({
  name: 'echo',
  containers: [
    {
      name: 'echo',
      image: 'x:1',
      // Twice, in the fields a pod annotation may reach (an env value, a resource is not text).
      env: [
        { name: 'NOTE', value: "{{ pod.annotations['example.com/note'] }}" },
        { name: 'NOTE_AGAIN', value: "{{ pod.annotations['example.com/note'] }}" },
      ],
    },
  ],
});
const deps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }) };
let patched = 0;
for (let i = 0; i < count; i++) {
  const note = `${i}-`.padEnd(size, 'x');
  const outcome = await admitPod(
    {
      pod: { metadata: { generateName: 'p-', annotations: { 'example.com/note': note } }, spec: { containers: [{ name: 'app', image: 'x' }] } },
      namespace: 'shop',
      name: '',
    },
    deps,
  );
  if (outcome.decision === 'patched') patched++;
}
globalThis.gc?.();
process.stdout.write(`${JSON.stringify({ patched, cache: renderCacheSize(set.byName.get('echo')!), heapUsed: process.memoryUsage().heapUsed })}\n`);
