/**
 * The practical limit on this machine: a bare node:https server that reads the body, parses
 * it, and answers a fixed AdmissionReview with the uid echoed. No routing, no validation, no
 * logging. Started by bench/run.ts with the key and certificate files as arguments; prints
 * `{"port":N}` once listening.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const [certFile, keyFile] = process.argv.slice(2);
const server = https.createServer({ cert: readFileSync(certFile!), key: readFileSync(keyFile!), keepAliveTimeout: 120_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: { uid: string } };
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } }));
  });
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
process.on('SIGTERM', () => process.exit(0));
