import test from 'ava';
import { X509Certificate } from 'node:crypto';
import { createCa, createServingCertificate } from '../tls/certificates.js';
import {
  armedAnnotation,
  bundleToTrust,
  failClosedAnnotation,
  parseSecretData,
  planCertificates,
  serviceDnsNames,
  splitCertificates,
  trustedByConfiguration,
  unarmed,
  webhookPatch,
} from './plan.js';

const day = 24 * 60 * 60 * 1000;
const t0 = Date.UTC(2026, 10, 24);
const names = serviceDnsNames('sidecar-injector', 'sidecar-injector');
const b64 = (text: string) => Buffer.from(text).toString('base64');

async function secretData(options: { caDays?: number; certDays?: number; names?: string[]; otherCa?: boolean } = {}) {
  const ca = await createCa(options.caDays ?? 3650, 'test CA', t0);
  const signer = options.otherCa ? await createCa(3650, 'other CA', t0) : ca;
  const serving = await createServingCertificate(signer, options.names ?? names, [], options.certDays ?? 365, t0);
  return { 'tls.crt': b64(serving.cert), 'tls.key': b64(serving.key), 'ca.crt': b64(ca.cert), 'ca.key': b64(ca.key) };
}

test('a fresh Secret is kept', async (t) => {
  t.deepEqual(planCertificates(parseSecretData(await secretData()), t0 + day, names), { action: 'keep' });
});

test('no Secret, or one without every key, gets everything issued', async (t) => {
  t.is(planCertificates(undefined, t0, names).action, 'issue-all');
  const { 'ca.key': _key, ...partial } = await secretData();
  const plan = planCertificates(parseSecretData(partial), t0, names);
  t.is(plan.action, 'issue-all');
  t.regex((plan as { reason: string }).reason, /lacks one of tls\.crt, tls\.key, ca\.crt, ca\.key/);
});

test('a CA key that is not the CA’s, or garbage, gets everything issued with the reason', async (t) => {
  const data = await secretData();
  const other = await secretData();
  t.deepEqual(parseSecretData({ ...data, 'ca.key': other['ca.key'] }), { problem: 'ca.key is not the key of the CA' });
  t.deepEqual(parseSecretData({ ...data, 'tls.key': other['tls.key'] }), { problem: 'tls.key is not the key of tls.crt' });
  t.deepEqual(parseSecretData({ ...data, 'ca.crt': b64('not a certificate') }), { problem: 'ca.crt holds no PEM certificate' });
  t.deepEqual(parseSecretData({ ...data, 'ca.crt': data['tls.crt'] }), { problem: 'the first certificate of ca.crt is not a CA' });
  t.deepEqual(parseSecretData(null), { problem: 'the Secret has no data' });
  t.deepEqual(parseSecretData(JSON.parse('{"__proto__": {"tls.crt": "x"}}')), { problem: 'the Secret lacks one of tls.crt, tls.key, ca.crt, ca.key' });
});

test('the serving certificate is renewed in the last third of its life, from the same CA', async (t) => {
  const stored = parseSecretData(await secretData({ certDays: 90 }));
  t.is(planCertificates(stored, t0 + 59 * day, names).action, 'keep');
  const plan = planCertificates(stored, t0 + 61 * day, names);
  t.is(plan.action, 'issue-serving');
  t.regex((plan as { reason: string }).reason, /^the serving certificate expires at 2027-02-21T23:59:00.000Z$/);
});

test('a serving certificate lacking a DNS name of the Service, or signed by another CA, is reissued', async (t) => {
  const short = planCertificates(parseSecretData(await secretData({ names: ['sidecar-injector.sidecar-injector.svc'] })), t0, names);
  t.deepEqual(short, {
    action: 'issue-serving',
    reason: 'the serving certificate lacks sidecar-injector.sidecar-injector.svc.cluster.local, sidecar-injector.sidecar-injector, sidecar-injector',
  });
  t.deepEqual(planCertificates(parseSecretData(await secretData({ otherCa: true })), t0, names), {
    action: 'issue-serving',
    reason: 'the serving certificate is not signed by the CA',
  });
});

test('a CA in the last third of its life is replaced, and kept trusted until it expires', async (t) => {
  const data = await secretData({ caDays: 30, certDays: 10 });
  const plan = planCertificates(parseSecretData(data), t0 + 21 * day, names);
  t.is(plan.action, 'issue-all');
  t.deepEqual(plan.action === 'issue-all' ? plan.stillTrusted : undefined, splitCertificates(Buffer.from(data['ca.crt'], 'base64').toString('utf8')));
  const expired = planCertificates(parseSecretData(data), t0 + 31 * day, names);
  t.deepEqual(expired.action === 'issue-all' ? expired.stillTrusted : undefined, []);
});

test('a bundle is read as at most four certificates, in order', async (t) => {
  const ca = await createCa(1, 'one', t0);
  const pems = splitCertificates(ca.cert.repeat(6));
  t.is(pems.length, 4);
  t.is(new X509Certificate(pems[3]!).subject, 'CN=one');
});

const configuration = (annotations: Record<string, string> = {}) => ({
  metadata: { name: 'sidecar-injector', resourceVersion: '42', annotations },
  webhooks: [
    { name: 'required.sidecar-injector.io', failurePolicy: 'Ignore', clientConfig: { service: { name: 's' } } },
    { name: 'optional.sidecar-injector.io', failurePolicy: 'Ignore', clientConfig: { service: { name: 's' }, caBundle: 'QUJD' } },
  ],
});

test('the webhook patch writes the caBundle by webhook name, arms the named webhooks, and carries the resourceVersion', (t) => {
  const change = webhookPatch(configuration({ [failClosedAnnotation]: 'required.sidecar-injector.io' }), 'QUJD');
  t.deepEqual(change, {
    patch: {
      metadata: { resourceVersion: '42', annotations: { [armedAnnotation]: 'required.sidecar-injector.io' } },
      webhooks: [{ name: 'required.sidecar-injector.io', clientConfig: { caBundle: 'QUJD' }, failurePolicy: 'Fail' }],
    },
    webhooks: ['required.sidecar-injector.io'],
  });
});

test('a webhook armed once is never armed again: an operator who sets it to Ignore keeps Ignore; the caBundle is still written', (t) => {
  const reset = configuration({ [failClosedAnnotation]: 'required.sidecar-injector.io', [armedAnnotation]: 'required.sidecar-injector.io' });
  t.deepEqual(unarmed(reset), []);
  t.deepEqual(webhookPatch(reset, 'QUJD'), {
    patch: { metadata: { resourceVersion: '42' }, webhooks: [{ name: 'required.sidecar-injector.io', clientConfig: { caBundle: 'QUJD' } }] },
    webhooks: ['required.sidecar-injector.io'],
  });
  // Not yet allowed to arm (no replica ready): the caBundle only, and nothing recorded.
  const fresh = configuration({ [failClosedAnnotation]: 'required.sidecar-injector.io' });
  t.deepEqual(webhookPatch(fresh, 'QUJD', false)?.patch.metadata, { resourceVersion: '42' });
});

test('the webhook patch leaves failurePolicy alone without the annotation, and is nothing when all is in place', (t) => {
  t.deepEqual(webhookPatch(configuration(), 'QUJD')?.patch.webhooks, [{ name: 'required.sidecar-injector.io', clientConfig: { caBundle: 'QUJD' } }]);
  const done = configuration({ [failClosedAnnotation]: 'required.sidecar-injector.io' });
  done.webhooks[0]!.failurePolicy = 'Fail';
  (done.webhooks[0]!.clientConfig as Record<string, unknown>).caBundle = 'QUJD';
  t.is(webhookPatch(done, 'QUJD'), undefined);
});

test('the webhook patch ignores what is not a webhook (no name, __proto__ keys, no list)', (t) => {
  t.is(webhookPatch(null, 'QUJD'), undefined);
  t.is(webhookPatch({ webhooks: 'nope' }, 'QUJD'), undefined);
  const odd = JSON.parse(
    '{"metadata":{"annotations":{"__proto__":"x"}},"webhooks":[null,{"clientConfig":{}},{"name":"__proto__","clientConfig":{"caBundle":"QUJD"}}]}',
  );
  t.is(webhookPatch(odd, 'QUJD'), undefined);
});

test('what the webhooks trust: each CA once, valid ones only, nothing from garbage or a serving certificate', async (t) => {
  const data = await secretData();
  const other = await secretData();
  const ca = Buffer.from(data['ca.crt'], 'base64').toString('utf8');
  const otherCa = Buffer.from(other['ca.crt'], 'base64').toString('utf8');
  const expired = await createCa(1, 'expired CA', t0 - 10 * day);
  const configuration = {
    webhooks: [
      { name: 'a', clientConfig: { caBundle: b64(ca + otherCa) } },
      { name: 'b', clientConfig: { caBundle: b64(ca + expired.cert + Buffer.from(data['tls.crt'], 'base64').toString('utf8')) } },
      { name: 'c', clientConfig: { caBundle: 'not base64 at all' } },
      { name: 'd', clientConfig: { caBundle: 42 } },
      { name: '__proto__' },
    ],
  };
  t.deepEqual(
    trustedByConfiguration(configuration, t0 + day).map((pem) => new X509Certificate(pem).subject),
    [new X509Certificate(ca).subject, new X509Certificate(otherCa).subject],
  );
  t.deepEqual(trustedByConfiguration(undefined, t0), []);
  t.deepEqual(trustedByConfiguration({ webhooks: 'x' }, t0), []);
});

test('CAs the webhooks trust stay trusted: carried into a valid Secret that lacks them, kept beside a new CA when everything is issued', async (t) => {
  const data = await secretData();
  const old = Buffer.from((await secretData())['ca.crt'], 'base64').toString('utf8');
  const own = Buffer.from(data['ca.crt'], 'base64').toString('utf8');
  t.like(planCertificates(parseSecretData(data), t0 + day, names, [own]), { action: 'keep' });
  t.deepEqual(planCertificates(parseSecretData(data), t0 + day, names, [own, old]), {
    action: 'extend-bundle',
    reason: "the webhooks trust a CA the Secret's bundle lacks; replicas may still serve certificates signed by it",
    carried: [old],
  });
  t.like(planCertificates(undefined, t0, names, [old]), { action: 'issue-all', stillTrusted: [old] });
  t.like(planCertificates(parseSecretData({ ...data, 'ca.key': 'x' }), t0, names, [old]), { action: 'issue-all', stillTrusted: [old] });
});

test('the caBundle written keeps what the configuration trusts now: a round planned on an older read never drops a CA another replica has just made', async (t) => {
  const mine = await createCa(3650, 'this round', t0);
  const theirs = await createCa(3650, 'the other leader', t0);
  const expired = await createCa(1, 'expired', t0 - 2 * day);
  const configuration = { webhooks: [{ name: 'required.sidecar-injector.io', clientConfig: { caBundle: b64(`${theirs.cert}${expired.cert}`) } }] };
  const written = bundleToTrust([mine.cert], configuration, t0);
  t.deepEqual(
    written.map((pem) => new X509Certificate(pem).subject),
    ['CN=this round', 'CN=the other leader'],
  );
  t.deepEqual(bundleToTrust([mine.cert, theirs.cert], configuration, t0).length, 2, 'each CA once');
  t.deepEqual(bundleToTrust([mine.cert], {}, t0).length, 1);
  // Patched: the configuration trusts both, and a later round with the same bundle changes nothing.
  const patch = webhookPatch(configuration, b64(written.join('')), false)!;
  t.deepEqual(patch.webhooks, ['required.sidecar-injector.io']);
  const after = { webhooks: [{ name: 'required.sidecar-injector.io', clientConfig: { caBundle: b64(written.join('')) } }] };
  t.is(webhookPatch(after, b64(bundleToTrust([mine.cert], after, t0).join('')), false), undefined);
});
