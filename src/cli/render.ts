/**
 * `sidecar-injector render`: offline preview. Reads manifests (multi-document YAML or JSON;
 * files, directories and stdin), injects every pod template with the same code as the
 * webhook, writes the result on stdout as YAML (ready for `kubectl apply -f -`) or JSON;
 * `--explain` says on stderr, per object, which templates were injected or skipped and why.
 * All or nothing: in a pipe, a workload the webhook would refuse must not reach `kubectl
 * apply` without its sidecars, so one refusal writes nothing.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments, stringify, visit, type Document } from 'yaml';
import { parseOptions } from '../options.js';
import { renderOptions } from './usage.js';
import { ConfigError } from '../errors.js';
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { injectManifest, type InjectedManifest } from '../manifests/inject-manifests.js';
import { parseNamespaceLabelFlag, metadataNameLabel, type NamespaceLabelSource } from '../namespaces/source.js';
import { templatesFromFlagOrCluster } from './cluster-reads.js';
import { loadLocalNamespaceSource } from '../namespaces/file.js';
import { kubernetesVersionProblem } from '../config.js';
import { decideVersion, parseKubernetesVersion } from '../k8s/version.js';
import type { AdmitDeps } from '../pipeline/admit.js';
import { podSecurityActionProblem, type PodSecurityAction } from '../pipeline/pod-security-fit.js';
import type { CommandIo } from './io.js';

/** Output streams and stdin, so that tests need no process. */
export interface RenderIo extends CommandIo {
  readonly stdin: AsyncIterable<Buffer | string>;
}

/** A source that treats every namespace as opted in (a preview with no labels given). */
const optedInEverywhere: NamespaceLabelSource = {
  kind: 'assumed',
  isReady: () => true,
  status: () => ({ source: 'assumed: every namespace opted in' }),
  labelsOf: async (namespace) => ({ [LabelKeys.namespaceOptIn]: LabelValues.enabled, [metadataNameLabel]: namespace }),
};

/** One input: where it came from (a path, or `-`) and its text. */
interface Input {
  readonly name: string;
  readonly text: string;
}

/** A manifest file in a directory: YAML or JSON, not hidden. */
const isManifestName = (name: string) => !name.startsWith('.') && /\.(ya?ml|json)$/i.test(name);

/** The manifest files under `dir`, recursively, in path order. */
async function manifestFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() && !entry.name.startsWith('.')) files.push(...(await manifestFiles(path)));
    else if (entry.isFile() && isManifestName(entry.name)) files.push(path);
  }
  return files;
}

/** Reads every `-f`: files, directories (recursively) and `-` (stdin, once), in the order given. */
async function readInputs(names: readonly string[], io: RenderIo): Promise<Input[]> {
  const inputs: Input[] = [];
  const problems: string[] = [];
  if (names.filter((n) => n === '-').length > 1) throw new ConfigError(['-f -: stdin can be read once']);
  for (const name of names) {
    if (name === '-') {
      let text = '';
      for await (const chunk of io.stdin) text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      inputs.push({ name, text });
      continue;
    }
    try {
      const files = (await stat(name)).isDirectory() ? await manifestFiles(name) : [name];
      if (files.length === 0) problems.push(`-f ${name}: no *.yaml, *.yml or *.json files in this directory`);
      for (const file of files) inputs.push({ name: file, text: await readFile(file, 'utf8') });
    } catch (err) {
      problems.push(`-f ${name}: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return inputs;
}

/** True when the document uses YAML anchors or aliases: it is then written from its value, without them. */
function hasAnchors(doc: Document): boolean {
  let found = false;
  visit(doc, {
    Alias: () => {
      found = true;
      return visit.BREAK;
    },
    Node: (_, node) => {
      if ('anchor' in node && node.anchor) {
        found = true;
        return visit.BREAK;
      }
      return undefined;
    },
  });
  return found;
}

/** Output formats: YAML documents, or JSON (one object, or a v1 List of several). */
const outputFormats = ['yaml', 'json'] as const;
type OutputFormat = (typeof outputFormats)[number];

/** Writes `objects` as one JSON text: the object itself, or a List as `kubectl apply -f` reads it. */
function asJson(objects: readonly unknown[]): string {
  const value = objects.length === 1 ? objects[0] : { apiVersion: 'v1', kind: 'List', items: objects };
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** Runs `render`; returns the exit code (0, or 1 when a workload would be refused: then nothing is written, unless --keep-going). */
export async function render(argv: readonly string[], io: RenderIo, env: Readonly<Record<string, string | undefined>> = {}): Promise<number> {
  const { values } = parseOptions('render', renderOptions, argv, env);
  const files = (values.filename as string[] | undefined) ?? [];
  if (files.length === 0) throw new ConfigError(['-f FILE (or a directory, or -f - for stdin) is required']);
  const output = ((values.output as string | undefined) ?? 'yaml') as OutputFormat;
  if (!outputFormats.includes(output)) throw new ConfigError([`-o: expected yaml or json (got ${JSON.stringify(output).slice(0, 80)})`]);
  const keepGoing = values['keep-going'] === true;
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
  const versionText = values['kubernetes-version'] as string | undefined;
  const version = versionText === undefined ? undefined : parseKubernetesVersion(versionText);
  if (versionText !== undefined && !version) throw new ConfigError([kubernetesVersionProblem(versionText)]);
  const action = (values['pod-security-action'] as string | undefined) ?? 'skip';
  const actionProblem = podSecurityActionProblem(action);
  if (actionProblem) throw new ConfigError([actionProblem]);
  const set = await templatesFromFlagOrCluster(values.templates as string | undefined, values.kubeconfig as string | undefined, 'render', io.stderr);

  const documents: { input: string; index: number; doc: Document }[] = [];
  for (const input of await readInputs(files, io)) {
    const parsed = parseAllDocuments(input.text, { uniqueKeys: true });
    const docs = Array.isArray(parsed) ? parsed : [parsed];
    const parseProblems = docs.flatMap((d, i) => d.errors.map((e) => `${input.name}: document ${i + 1}: ${e.message.split('\n')[0]}`));
    if (parseProblems.length > 0) throw new ConfigError(parseProblems);
    docs.forEach((doc, i) => documents.push({ input: input.name, index: i + 1, doc }));
  }

  const namespaceOption = values.namespace as string | undefined;
  const options = { ...(namespaceOption ? { namespace: namespaceOption } : {}), defaultNamespace: 'default', assumedOptIn };
  const decision = decideVersion(version ? { flag: version } : {});
  const deps: AdmitDeps = { templates: () => set, namespaces, kubernetesVersion: () => decision, podSecurity: action as PodSecurityAction };
  const yamlOut: string[] = [];
  const jsonOut: unknown[] = [];
  const refused: string[] = [];
  for (const { input, index, doc } of documents) {
    let object: unknown;
    try {
      object = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      // An unresolved or excessive alias: the document cannot be read.
      throw new ConfigError([`${input}: document ${index}: ${(err as Error).message.split('\n')[0]}`]);
    }
    if (object === null || object === undefined) continue;
    const result: InjectedManifest = await injectManifest(object, options, deps);
    jsonOut.push(result.object);
    // Unchanged objects are written as they were read, comments included, unless they use
    // anchors or aliases (which reviewers and GitOps diffs stumble on). The separator is
    // written between documents below; a document's own `---` is dropped.
    const asRead = !result.changed && !hasAnchors(doc);
    yamlOut.push(
      asRead ? doc.toString({ lineWidth: 0 }).replace(/^---[ \t]*\n/, '') : stringify(result.object, { lineWidth: 0, aliasDuplicateObjects: false }),
    );
    if (result.refused) refused.push(result.label);
    if (values.explain || result.refused) {
      io.stderr.write(
        `${result.label}: ${result.explanation[0] ?? ''}\n${result.explanation
          .slice(1)
          .map((l) => `  ${l}\n`)
          .join('')}`,
      );
    }
  }
  if (refused.length > 0 && !keepGoing) {
    io.stderr.write(
      `render: ${refused.length} of ${documents.length} document(s) refused: nothing written, so that no workload is applied without its sidecars (--keep-going writes the rest)\n`,
    );
    return 1;
  }
  io.stdout.write(output === 'json' ? asJson(jsonOut) : yamlOut.map((d) => (d.endsWith('\n') ? d : `${d}\n`)).join('---\n'));
  if (refused.length > 0) {
    io.stderr.write(`render: --keep-going: WRITTEN WITHOUT THEIR SIDECARS, as read: ${refused.join(', ')}\n`);
    return 1;
  }
  return 0;
}
