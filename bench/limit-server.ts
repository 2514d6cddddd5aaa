/**
 * The practical limit on this machine: a bare node:https server that reads the body, parses
 * it, and answers a fixed AdmissionReview with the uid echoed. No routing, no validation, no
 * logging. Started by bench/run.ts with the key and certificate files as arguments; prints
 * `{"port":N}` once listening. With a third argument, a file holding `{ "<body size>": "<patch>" }`,
 * it answers with that base64 patch instead (the one under `"*"` for a size not listed): the same bytes on the wire as the injector's
 * answer, to tell the cost of the work from the cost of the answer's size.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const [certFile, keyFile, patchFile] = process.argv.slice(2);
const patches = patchFile ? (JSON.parse(readFileSync(patchFile, 'utf8')) as Record<string, string>) : {};
const server = https.createServer({ cert: readFileSync(certFile!), key: readFileSync(keyFile!), keepAliveTimeout: 120_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const review = JSON.parse(body.toString('utf8')) as { request: { uid: string } };
    const patch = patches[String(body.length)] ?? patches['*'];
    res.setHeader('content-type', 'application/json');
    const response = patch ? { uid: review.request.uid, allowed: true, patchType: 'JSONPatch', patch } : { uid: review.request.uid, allowed: true };
    res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }));
  });
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
