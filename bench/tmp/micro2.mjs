import { mutate } from '/work/main/dist/src/admission/mutate.js';
import { createLocalNamespaceSource } from '/work/main/dist/src/selection/namespace-labels.js';
import { loadTemplateDir } from '/work/main/dist/src/templates/load.js';
import { reviewText } from '/work/main/dist/bench/reviews.js';
const set = await loadTemplateDir('/work/main/templates');
const deps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }) };
const text = reviewText(process.argv[2] ?? 'typical');
for (let i = 0; i < 3000; i++) JSON.stringify((await mutate(JSON.parse(text), deps)).response);
const N = 20000; let tm = 0, ts = 0, tp = 0;
for (let i = 0; i < N; i++) { let t0 = performance.now(); const b = JSON.parse(text); tp += performance.now() - t0; t0 = performance.now(); const o = await mutate(b, deps); tm += performance.now() - t0; t0 = performance.now(); JSON.stringify(o.response); ts += performance.now() - t0; }
console.log('parse', (tp/N*1000).toFixed(1), 'mutate', (tm / N * 1000).toFixed(1), 'stringify', (ts/N*1000).toFixed(1));
