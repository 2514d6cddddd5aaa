import { mutate } from '/work/main/dist/src/admission/mutate.js';
import { createLocalNamespaceSource } from '/work/main/dist/src/selection/namespace-labels.js';
import { loadTemplateDir } from '/work/main/dist/src/templates/load.js';
import { reviewText } from '/work/main/dist/bench/reviews.js';
const set = await loadTemplateDir('/work/main/templates');
const deps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }) };
const text = reviewText(process.argv[2] ?? 'typical');
for (let i = 0; i < 2000; i++) JSON.stringify((await mutate(JSON.parse(text), deps)).response);
const N = 20000; let t = 0;
for (let i = 0; i < N; i++) { const b = JSON.parse(text); const t0 = performance.now(); JSON.stringify((await mutate(b, deps)).response); t += performance.now() - t0; }
console.log('mean us', (t / N * 1000).toFixed(1));
