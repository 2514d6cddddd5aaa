#!/usr/bin/env node
// Reads an AdmissionReview response on stdin and prints it with its patch decoded (or says there is none).
let text = '';
for await (const chunk of process.stdin) text += chunk;
const review = JSON.parse(text);
const { patch, ...response } = review.response ?? {};
console.log(JSON.stringify({ ...review, response }, null, 2));
if (patch) console.log(JSON.stringify(JSON.parse(Buffer.from(patch, 'base64').toString('utf8')), null, 2));
else console.log('no patch: the pod is allowed as it is');
