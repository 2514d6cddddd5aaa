/**
 * The local namespace label source, read from a labels file and `--namespace-label` flags.
 * Start-up I/O for `serve` and `render`.
 */
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../errors.js';
import { createLocalNamespaceSource, parseNamespaceLabelMap, type NamespaceLabelSource } from './source.js';

/** Where the local source's labels come from: a file and/or `--namespace-label` flags. */
export interface LocalNamespaceLabels {
  readonly namespaceLabelsFile?: string;
  readonly namespaceLabels: Readonly<Record<string, Readonly<Record<string, string>>>>;
}

/** Builds the local namespace source from the labels file and the flags (flags win). */
export async function loadLocalNamespaceSource(config: LocalNamespaceLabels): Promise<NamespaceLabelSource> {
  const merged: Record<string, Record<string, string>> = Object.create(null);
  let annotations: Record<string, Record<string, string>> = Object.create(null);
  if (config.namespaceLabelsFile) {
    let text: string;
    try {
      text = await readFile(config.namespaceLabelsFile, 'utf8');
    } catch (err) {
      throw new ConfigError([`--namespace-labels: cannot read ${config.namespaceLabelsFile}: ${(err as Error).message}`]);
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new ConfigError([`--namespace-labels: ${config.namespaceLabelsFile} is not valid YAML: ${(err as Error).message.split('\n')[0]}`]);
    }
    const parsed = parseNamespaceLabelMap(doc, config.namespaceLabelsFile);
    if (parsed.problems.length > 0) throw new ConfigError(parsed.problems);
    Object.assign(merged, parsed.map);
    annotations = parsed.annotations;
  }
  for (const [namespace, labels] of Object.entries(config.namespaceLabels))
    merged[namespace] = { ...(Object.hasOwn(merged, namespace) ? merged[namespace] : {}), ...labels };
  return createLocalNamespaceSource(merged, annotations);
}
