#!/usr/bin/env node
// Reads an AdmissionReview response on stdin and the review it answered (the file named as the
// first argument), and prints that review again with the answer's patch applied to its pod and a
// new uid: what the API server sends when it calls the webhook again (reinvocation).
import { readFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import jsonPatch from 'fast-json-patch';

const [file] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/patched-review.mjs REVIEW.json < ANSWER.json');
  process.exit(2);
}
let text = '';
for await (const chunk of process.stdin) text += chunk;
const answer = JSON.parse(text);
const review = JSON.parse(await readFile(file, 'utf8'));
const patch = answer.response?.patch ? JSON.parse(Buffer.from(answer.response.patch, 'base64').toString('utf8')) : [];
const pod = jsonPatch.applyPatch(review.request.object, patch, true, false).newDocument;
console.log(JSON.stringify({ ...review, request: { ...review.request, uid: randomUUID(), object: pod } }, null, 2));
