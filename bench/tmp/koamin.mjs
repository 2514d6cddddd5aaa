import https from 'node:https'; import fs from 'node:fs';
import Koa from '/work/main/node_modules/koa/dist/koa.mjs';
import { readJsonBody } from '/work/main/dist/src/http/body.js';
import { reviewText } from '/work/main/dist/bench/reviews.js';
const mode = process.argv[2];
let handler;
if (mode === 'koa') { const app = new Koa(); app.use(async (ctx) => { const b = await readJsonBody(ctx.req, 7<<20); ctx.type='application/json'; ctx.body = JSON.stringify({apiVersion:'admission.k8s.io/v1',kind:'AdmissionReview',response:{uid:b.request.uid,allowed:true}}); }); handler = app.callback(); }
else handler = (req, res) => { const ch=[]; req.on('data',c=>ch.push(c)); req.on('end',()=>{ const b=JSON.parse(Buffer.concat(ch).toString()); res.setHeader('content-type','application/json'); res.end(JSON.stringify({apiVersion:'admission.k8s.io/v1',kind:'AdmissionReview',response:{uid:b.request.uid,allowed:true}})); }); };
const stamps=[];
const server = https.createServer({ key: fs.readFileSync('/tmp/bench/tls.key'), cert: fs.readFileSync('/tmp/bench/tls.crt'), keepAliveTimeout: 120000 }, (req, res) => { const t0 = process.hrtime.bigint(); res.on('finish', () => stamps.push(Number(process.hrtime.bigint() - t0)/1000)); handler(req, res); });
await new Promise(r => server.listen(0, '127.0.0.1', r));
const ca = fs.readFileSync('/tmp/bench/ca.crt','utf8'); const body = reviewText('typical');
const agent = new https.Agent({keepAlive:true, maxSockets:1, ca});
const send = () => new Promise((res, rej) => { const r = https.request({host:'127.0.0.1', port:server.address().port, path:'/mutate', method:'POST', agent, servername:'localhost', headers:{'content-type':'application/json'}}, (s) => { s.resume(); s.on('end', res); }); r.on('error', rej); r.end(body); });
for (let i = 0; i < 500; i++) await send();
stamps.length = 0;
const lat = []; for (let i = 0; i < 2000; i++) { const t0 = performance.now(); await send(); lat.push((performance.now()-t0)*1000); }
lat.sort((a,b)=>a-b); stamps.sort((a,b)=>a-b);
console.log(mode, 'client p50 us', lat[1000].toFixed(0), 'server handler p50 us', stamps[1000].toFixed(0));
agent.destroy(); server.close(); process.exit(0);
