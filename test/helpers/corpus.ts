/** The corpus of real pods kept with the tests (test/fixtures/corpus; SOURCES.md there says where each comes from). */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const corpusDir = resolve('test', 'fixtures', 'corpus');

export interface CorpusPod {
  readonly name: string;
  readonly namespace: string;
  readonly body: Record<string, any>;
}

/** Every pod of the corpus with the namespace its request is sent to. */
export function loadCorpus(): CorpusPod[] {
  const index = JSON.parse(readFileSync(join(corpusDir, 'index.json'), 'utf8')) as Record<string, { namespace: string }>;
  return Object.entries(index).map(([name, entry]) => ({
    name,
    namespace: entry.namespace,
    body: JSON.parse(readFileSync(join(corpusDir, `${name}.json`), 'utf8')),
  }));
}
