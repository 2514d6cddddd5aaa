import test from 'ava';
import { AdmissionError } from '../errors.js';
import { parsePod } from './pod.js';

test('a missing spec.containers and an empty one get the same answer: the API server calls both a missing required value', (t) => {
  const messages = [{}, { containers: [] }, { containers: null }].map((spec) => {
    const error = t.throws(() => parsePod({ metadata: { name: 'p' }, spec }), { instanceOf: AdmissionError });
    return `${error.code}: ${error.message}`;
  });
  t.is(new Set(messages).size, 1, messages.join('\n'));
  t.regex(messages[0]!, /^ERR_INVALID_POD: .*spec\.containers.*is required/);
  // Empty optional lists are fine.
  t.is(parsePod({ metadata: { name: 'p' }, spec: { containers: [{ name: 'a', image: 'x' }], initContainers: [], volumes: [] } }).initContainers.length, 0);
});
