import test from 'ava';
import { encodePatch } from '../inject/patch.js';
import { allowed, answerBytes, answerText, denied, maxWarningLength, patched, sanitizeWarnings } from './review.js';

test('allowed carries no patch fields', (t) => {
  t.deepEqual(allowed('admission.k8s.io/v1', 'u'), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'u', allowed: true } });
});

test('an empty patch is answered without patch fields (R-43, R-51)', (t) => {
  t.deepEqual(patched('admission.k8s.io/v1beta1', 'u', []), allowed('admission.k8s.io/v1beta1', 'u'));
});

test('a patch is standard base64 with padding of the JSON array (R-32)', (t) => {
  const ops = [{ op: 'add' as const, path: '/metadata/annotations/a~1b', value: 'ÿ?>' }];
  const { response } = patched('admission.k8s.io/v1', 'u', ops);
  t.is(response.patchType, 'JSONPatch');
  t.regex(response.patch ?? '', /^[A-Za-z0-9+/]+={0,2}$/);
  t.is((response.patch ?? '').length % 4, 0);
  t.deepEqual(JSON.parse(Buffer.from(response.patch ?? '', 'base64').toString('utf8')), ops);
});

test('a denial carries a Failure status with a code of at least 400 (R-46)', (t) => {
  t.deepEqual(denied('admission.k8s.io/v1', 'u', 200, 'no').response.status, { status: 'Failure', code: 400, reason: 'BadRequest', message: 'no' });
  t.deepEqual(denied('admission.k8s.io/v1', 'u', 503, 'later').response.status, {
    status: 'Failure',
    code: 503,
    reason: 'ServiceUnavailable',
    message: 'later',
  });
});

test('warnings lose control characters, are cut to 120 characters and deduplicated (R-48)', (t) => {
  const long = 'x'.repeat(300);
  const out = sanitizeWarnings(['a\nb\tc\u0000d', long, 'same', 'same', '', '  ', '\u001b[31mred']);
  t.deepEqual(out.slice(0, 1), ['a b c d']);
  t.is([...out[1]!].length, maxWarningLength);
  t.true(out[1]!.endsWith('…'));
  t.deepEqual(out.slice(2), ['same', '[31mred']);
  // eslint-disable-next-line no-control-regex -- control characters are what the test looks for
  for (const w of out) t.false(/[\u0000-\u001f\u007f-\u009f]/.test(w));
});

test('audit annotation keys hold no slash (R-47)', (t) => {
  const { response } = patched('admission.k8s.io/v1', 'u', [{ op: 'add', path: '/x', value: 1 }], { auditAnnotations: { injected: 'a@1' } });
  for (const key of Object.keys(response.auditAnnotations ?? {})) t.false(key.includes('/'));
});

test('encodePatch gives exactly what JSON.stringify gives, frozen shared values included', (t) => {
  const shared = Object.freeze({ name: 'proxy', image: 'envoy', ports: Object.freeze([Object.freeze({ containerPort: 1 })]) });
  const patch = [
    { op: 'add' as const, path: '/spec/initContainers', value: [shared] },
    { op: 'add' as const, path: '/spec/containers/1', value: shared },
    { op: 'add' as const, path: '/metadata/annotations/a~1b', value: 'x"y\n' },
    { op: 'replace' as const, path: '/x', value: { nested: [1, null, true] } },
    { op: 'remove' as const, path: '/y' },
    { op: 'move' as const, path: '/b', from: '/a' },
  ];
  t.is(encodePatch(patch), JSON.stringify(patch));
  t.is(encodePatch(patch), JSON.stringify(patch), 'the second time, from the cache');
});

test('an answer is written as its head, the uid and its tail: the bytes JSON.stringify writes', (t) => {
  const responses = [
    allowed('admission.k8s.io/v1', 'u'),
    allowed('admission.k8s.io/v1beta1', 'u', { warnings: ['a "quoted" warning'] }),
    denied('admission.k8s.io/v1', 'u', 403, 'no: "why"\n', { auditAnnotations: { k: 'v' } }),
    patched('admission.k8s.io/v1', 'u', [{ op: 'add', path: '/a', value: 1 }], { warnings: ['w'], auditAnnotations: { injected: 'x@1' } }),
  ];
  for (const response of responses) {
    for (const uid of ['u', 'another-uid', 'ü "quoted" \\ uid']) {
      const expected = JSON.stringify({ ...response, response: { ...response.response, uid } });
      t.is(answerBytes(answerText(response), uid).toString('utf8'), expected);
    }
  }
});
