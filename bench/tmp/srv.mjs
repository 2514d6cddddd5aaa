import https from 'node:https'; import fs from 'node:fs';
import Koa from '/work/main/node_modules/koa/dist/koa.mjs';
import { pino } from '/work/main/node_modules/pino/pino.js';
import { readJsonBody } from '/work/main/dist/src/http/body.js';
import { createApp } from '/work/main/dist/src/app.js';
import { createMetrics } from '/work/main/dist/src/metrics.js';
import { loadTemplateDir } from '/work/main/dist/src/templates/load.js';
import { createLocalNamespaceSource } from '/work/main/dist/src/selection/namespace-labels.js';
import { mutate } from '/work/main/dist/src/admission/mutate.js';
let tot = 0, n = 0; process.on('SIGTERM', () => { console.error('mutate mean us', (tot/n).toFixed(1), 'n', n); process.exit(0); });
const mode = process.argv[2]; const port = Number(process.argv[3]);
const set = await loadTemplateDir('/work/main/templates');
const deps = { templates: () => set, namespaces: createLocalNamespaceSource({shop:{'sidecar-injector.io/injection':'enabled'}}) };
let handler;
if (mode === 'koa') { const app = new Koa(); app.use(async (ctx) => { const b = await readJsonBody(ctx.req, 7<<20); ctx.type='application/json'; ctx.body = JSON.stringify({apiVersion:'admission.k8s.io/v1',kind:'AdmissionReview',response:{uid:b.request.uid,allowed:true}}); }); handler = app.callback(); }
else if (mode === 'koa-mutate') { const app = new Koa(); app.use(async (ctx) => { const b = await readJsonBody(ctx.req, 7<<20); ctx.type='application/json'; ctx.body = JSON.stringify((await mutate(b, deps)).response); }); handler = app.callback(); }
else if (mode === 'bare-mutate') handler = (req, res) => { const ch=[]; req.on('data',c=>ch.push(c)); req.on('end',async ()=>{ const b=JSON.parse(Buffer.concat(ch).toString()); const t0=process.hrtime.bigint(); const o = await mutate(b, deps); tot += Number(process.hrtime.bigint()-t0)/1000; n++; res.setHeader('content-type','application/json'); res.end(JSON.stringify(o.response)); }); };
else if (mode === 'full') handler = createApp({ log: pino({level:'info'}, fs.createWriteStream('/dev/null')), metrics: createMetrics(), maxBodyBytes: 7<<20, ...deps, isReady: () => true }).callback();
else handler = (req, res) => { const ch=[]; req.on('data',c=>ch.push(c)); req.on('end',()=>{ const b=JSON.parse(Buffer.concat(ch).toString()); res.setHeader('content-type','application/json'); res.end(JSON.stringify({apiVersion:'admission.k8s.io/v1',kind:'AdmissionReview',response:{uid:b.request.uid,allowed:true}})); }); };
const server = https.createServer({ key: fs.readFileSync('/tmp/bench/tls.key'), cert: fs.readFileSync('/tmp/bench/tls.crt'), keepAliveTimeout: 120000 }, (req, res) => void handler(req, res));
server.listen(port, '127.0.0.1', () => console.log('ready'));
