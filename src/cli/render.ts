/**
 * `sidecar-injector render`: offline preview. Reads manifests (multi-document YAML or JSON,
 * a file or stdin), injects every pod template with the same code as the webhook, writes the
 * result as YAML on stdout (ready for `kubectl apply -f -`); `--explain` says on stderr, per
 * object, which templates were injected or skipped and why.
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments, stringify } from 'yaml';
import { parseOptions } from '../options.js';
import { renderOptions } from './usage.js';
import { ConfigError } from '../errors.js';
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { injectManifest, type InjectedManifest } from '../manifests/inject-manifests.js';
import { parseNamespaceLabelFlag, metadataNameLabel, type NamespaceLabelSource } from '../namespaces/source.js';
import { loadTemplateDir } from '../templates/load.js';
import { loadLocalNamespaceSource } from '../namespaces/file.js';
import { kubernetesVersionProblem } from '../config.js';
import { decideVersion, parseKubernetesVersion } from '../k8s/version.js';
import type { AdmitDeps } from '../pipeline/admit.js';
import { podSecurityActions, type PodSecurityAction } from '../pipeline/pod-security-fit.js';

/** Output streams and stdin, so that tests need no process. */
export interface RenderIo {
  readonly stdin: AsyncIterable<Buffer | string>;
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

/** A source that treats every namespace as opted in (a preview with no labels given). */
const optedInEverywhere: NamespaceLabelSource = {
  kind: 'assumed',
  isReady: () => true,
  status: () => ({ source: 'assumed: every namespace opted in' }),
  labelsOf: async (namespace) => ({ [LabelKeys.namespaceOptIn]: LabelValues.enabled, [metadataNameLabel]: namespace }),
};

async function readInput(file: string, io: RenderIo): Promise<string> {
  if (file === '-') {
    let text = '';
    for await (const chunk of io.stdin) text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    return text;
  }
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`-f ${file}: ${(err as Error).message}`]);
  }
}

/** Runs `render`; returns the exit code (0, or 1 when a pod would be refused). */
export async function render(argv: readonly string[], io: RenderIo, env: Readonly<Record<string, string | undefined>> = {}): Promise<number> {
  const { values } = parseOptions('render', renderOptions, argv, env);
  const file = values.filename as string | undefined;
  if (!file) throw new ConfigError(['-f FILE (or -f - for stdin) is required']);
  const labelFlags = (values['namespace-label'] as string[] | undefined) ?? [];
  // Null-prototype maps: names come from the command line.
  const namespaceLabels: Record<string, Record<string, string>> = Object.create(null);
  const problems: string[] = [];
  for (const flag of labelFlags) {
    const parsed = parseNamespaceLabelFlag(flag);
    if (typeof parsed === 'string') problems.push(parsed);
    else (namespaceLabels[parsed.namespace] ??= Object.create(null) as Record<string, string>)[parsed.key] = parsed.value;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const labelsFile = values['namespace-labels'] as string | undefined;
  const assumedOptIn = labelsFile === undefined && labelFlags.length === 0;
  const namespaces = assumedOptIn
    ? optedInEverywhere
    : await loadLocalNamespaceSource({ namespaceLabels, ...(labelsFile ? { namespaceLabelsFile: labelsFile } : {}) });
  const set = await loadTemplateDir((values.templates as string | undefined) ?? 'templates');

  const text = await readInput(file, io);
  const documents = parseAllDocuments(text, { uniqueKeys: true });
  const docs = Array.isArray(documents) ? documents : [documents];
  const parseProblems = docs.flatMap((d, i) => d.errors.map((e) => `${file}: document ${i + 1}: ${e.message.split('\n')[0]}`));
  if (parseProblems.length > 0) throw new ConfigError(parseProblems);

  const namespaceOption = values.namespace as string | undefined;
  const options = { ...(namespaceOption ? { namespace: namespaceOption } : {}), defaultNamespace: 'default', assumedOptIn };
  const versionText = values['kubernetes-version'] as string | undefined;
  const version = versionText === undefined ? undefined : parseKubernetesVersion(versionText);
  if (versionText !== undefined && !version) throw new ConfigError([kubernetesVersionProblem(versionText)]);
  const action = (values['pod-security-action'] as string | undefined) ?? 'skip';
  if (!podSecurityActions.includes(action as PodSecurityAction)) {
    throw new ConfigError([`--pod-security-action: expected ${podSecurityActions.join(', ')} (got ${JSON.stringify(action).slice(0, 80)})`]);
  }
  const decision = decideVersion(version ? { flag: version } : {});
  const deps: AdmitDeps = { templates: () => set, namespaces, kubernetesVersion: () => decision, podSecurity: action as PodSecurityAction };
  const out: string[] = [];
  let refused = 0;
  for (const [index, doc] of docs.entries()) {
    let object: unknown;
    try {
      object = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      // An unresolved or excessive alias: the document cannot be read.
      throw new ConfigError([`${file}: document ${index + 1}: ${(err as Error).message.split('\n')[0]}`]);
    }
    if (object === null || object === undefined) continue;
    const result: InjectedManifest = await injectManifest(object, options, deps);
    // Unchanged objects are written as they were read, comments included.
    // The separator is written between documents below; a document's own `---` is dropped.
    out.push(result.changed ? stringify(result.object, { lineWidth: 0 }) : doc.toString({ lineWidth: 0 }).replace(/^---[ \t]*\n/, ''));
    if (result.refused) refused++;
    if (values.explain || result.refused) {
      io.stderr.write(
        `${result.label}: ${result.explanation[0] ?? ''}\n${result.explanation
          .slice(1)
          .map((l) => `  ${l}\n`)
          .join('')}`,
      );
    }
  }
  io.stdout.write(out.map((d) => (d.endsWith('\n') ? d : `${d}\n`)).join('---\n'));
  return refused > 0 ? 1 : 0;
}
