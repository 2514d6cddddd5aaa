/**
 * Loads a template directory: every `*.yaml` / `*.yml` / `*.json` file holds one template.
 * Start-up I/O; all validation happens in compileTemplate.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isCollection, LineCounter, parseAllDocuments, parseDocument, visit, type Document, type YAMLError } from 'yaml';
import { TemplateError, type TemplateProblem } from '../errors.js';
import type { TemplateSet } from './set.js';
import { createRevisionSet, splitRollout, type RevisionFile, type RolloutStanza } from './rollout.js';
import { compileTemplate } from './compile.js';
import type { Template } from './template.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { isSidecarTemplateManifest, specProblem, templateDocument } from './resource.js';

/** True for a file name the loader reads as a template. */
export function isTemplateFileName(name: string): boolean {
  return !name.startsWith('.') && /\.(ya?ml|json)$/i.test(name) && !/^kustomization\.ya?ml$/i.test(name);
}

/** `line 3, column 5`: where a YAML error starts, 1-based, as editors count. */
export function yamlPosition(error: YAMLError, lineCounter: LineCounter): string {
  const { line, col } = lineCounter.linePos(error.pos[0]);
  return `line ${line}, column ${col}`;
}

/** Parses one file's text (YAML or JSON, a single document) and compiles it, its `rollout:` stanza apart. */
export function parseTemplateText(text: string, file: string): { template?: Template; stanza?: RolloutStanza; problems: TemplateProblem[] } {
  const lineCounter = new LineCounter();
  // One template per file: a second document (`---` between two) would be read by no one.
  const documents = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: false });
  if (Array.isArray(documents) && documents.length > 1)
    return {
      problems: [
        { file, field: '', message: `${documents.length} YAML documents: one SidecarTemplate per file (split it, and list each file in kustomization.yaml)` },
      ],
    };
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  const issues = doc.errors.length > 0 ? doc.errors : doc.warnings;
  if (issues.length > 0)
    return {
      problems: issues.map((e) => {
        const { line } = lineCounter.linePos(e.pos[0]);
        const hint = text.split('\n')[line - 1]?.includes('{{') ? '; a value with {{ must be quoted' : '';
        return { file, field: yamlPosition(e, lineCounter), message: `YAML: ${e.message.split('\n')[0]}${hint}` };
      }),
    };
  const unquoted = unquotedPlaceholders(doc, text, lineCounter, file);
  if (unquoted.length > 0) return { problems: unquoted };
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return { problems: [{ file, field: '', message: `YAML: ${(err as Error).message.split('\n')[0]}` }] };
  }
  return compileTemplateValue(value, file);
}

/**
 * Compiles one document read from a file or the API server: a SidecarTemplate manifest (its
 * spec, named by its metadata; problems name `spec.` fields) or a bare template document.
 */
export function compileTemplateValue(value: unknown, file: string): { template?: Template; stanza?: RolloutStanza; problems: TemplateProblem[] } {
  let doc = value;
  let inSpec = false;
  if (isSidecarTemplateManifest(value)) {
    const unwrapped = templateDocument(value, file);
    if (!unwrapped.doc) return { problems: unwrapped.problems };
    doc = unwrapped.doc;
    inSpec = true;
  }
  const split = splitRollout(doc, file);
  const compiled = compileTemplate(split.doc, file);
  const problems = [...split.problems, ...compiled.problems].map((p) => (inSpec ? specProblem(p) : p));
  if (!compiled.template || problems.length > 0) return { problems };
  const metadata = inSpec && isJsonObject((value as JsonObject).metadata) ? ((value as JsonObject).metadata as JsonObject) : undefined;
  const template = typeof metadata?.name === 'string' ? { ...compiled.template, object: metadata.name } : compiled.template;
  return { template, ...(split.stanza ? { stanza: split.stanza } : {}), problems };
}

/**
 * Values that start with an unquoted `{{` (`image: {{ params.image }}`, the Helm habit): YAML
 * reads `{` as the start of a map, so the value becomes a map whose key is a map. Named as
 * such, with the quoted form, before the document is read into values (which would only warn).
 */
function unquotedPlaceholders(doc: Document, text: string, lineCounter: LineCounter, file: string): TemplateProblem[] {
  const problems: TemplateProblem[] = [];
  visit(doc, {
    Pair: (_, pair, path) => {
      if (!isCollection(pair.key)) return undefined;
      const outer = path[path.length - 1] as { range?: [number, number, number] } | undefined;
      const start = outer?.range?.[0] ?? 0;
      const source = text.slice(start, outer?.range?.[1] ?? start).trim();
      const { line, col } = lineCounter.linePos(start);
      // `{{ x }}` alone is a map inside a map with no value: the unquoted placeholder. Any other
      // key that is a map or a list (`{{ x }}: v`, `? [a, b]`) cannot be a template's: keys are literal.
      if (!source.startsWith('{{') || pair.value !== null) {
        problems.push({
          file,
          field: `line ${line}, column ${col}`,
          message: 'YAML: a map key that is a map or a list; map keys are literal text (no placeholders in keys)',
        });
        return visit.SKIP;
      }
      const shown = source.length <= 120 ? source : `${source.slice(0, 117)}...`;
      problems.push({
        file,
        field: `line ${line}, column ${col}`,
        message: `YAML: ${shown} is read as a map: YAML takes { as the start of one; quote the value (${JSON.stringify(shown)})`,
      });
      return visit.SKIP;
    },
  });
  return problems;
}

/** The template files of a directory, as text. */
export interface TemplateFile {
  readonly name: string;
  readonly text: string;
}

/**
 * Reads every template file in `dir`. Skipped: names starting with `.` (the `..data` links of
 * a mounted ConfigMap) and `kustomization.yaml`, which makes the directory a kustomize base
 * (see manifests/). Throws TemplateError when the directory cannot be read.
 */
export async function readTemplateFiles(dir: string): Promise<TemplateFile[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    throw new TemplateError([{ file: dir, field: '', message: `cannot read the templates directory: ${(err as Error).message}` }]);
  }
  const files: TemplateFile[] = [];
  const problems: TemplateProblem[] = [];
  for (const name of names.filter(isTemplateFileName).sort()) {
    try {
      files.push({ name, text: await readFile(join(dir, name), 'utf8') });
    } catch (err) {
      // A directory or a dangling link with a template's name.
      problems.push({ file: name, field: '', message: `cannot be read: ${(err as Error).message}` });
    }
  }
  if (problems.length > 0) throw new TemplateError(problems);
  return files;
}

/** What a directory without template files means. */
export interface CompileOptions {
  /**
   * `serve` and `audit` take an empty directory as an empty set (an install with no templates
   * yet gives no pod a sidecar, and no pod can miss one); the offline commands refuse it, as a
   * wrong `--templates` path.
   */
  readonly allowEmpty?: boolean;
}

/** Compiles template files into a set; throws TemplateError listing every problem in every file. */
export function compileTemplateFiles(files: readonly TemplateFile[], dir: string, options: CompileOptions = {}): TemplateSet {
  const revisions: RevisionFile[] = [];
  const problems: TemplateProblem[] = [];
  for (const { name, text } of files) {
    const result = parseTemplateText(text, name);
    problems.push(...result.problems);
    if (result.template) revisions.push({ template: result.template, ...(result.stanza ? { stanza: result.stanza } : {}) });
  }
  if (files.length === 0 && !options.allowEmpty) problems.push({ file: dir, field: '', message: 'no template files (*.yaml, *.yml, *.json) found' });
  if (problems.length > 0) throw new TemplateError(problems);
  const { set, problems: revisionProblems } = createRevisionSet(revisions);
  if (revisionProblems.length > 0) throw new TemplateError(revisionProblems);
  return set;
}

/** Reads and validates every template in `dir`; throws TemplateError listing every problem. */
export async function loadTemplateDir(dir: string, options: CompileOptions = {}): Promise<TemplateSet> {
  return compileTemplateFiles(await readTemplateFiles(dir), dir, options);
}
