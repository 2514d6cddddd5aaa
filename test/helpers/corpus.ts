/** The shared corpus of real pods (../shared/corpus, or $SHARED_DIR/corpus). */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const corpusDir = join(process.env.SHARED_DIR ?? resolve(process.cwd(), '..', 'shared'), 'corpus');

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
