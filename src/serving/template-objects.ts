/**
 * The templates in force, read from the cluster: every SidecarTemplate kept in memory by a
 * reflector (a list and a watch, kube-api/reflector.ts), each object checked on its own with
 * every check of `check` (pipeline/template-check.ts). An object that fails is left out and
 * named (in /status, the log, a metric and its own status); the others are served. No volume,
 * no refresh delay: a change is in force as soon as its watch event arrives.
 *
 * Until the first list completes the replica knows no template: the set says so
 * (`unavailable`), admission refuses on the required webhook rather than guess, and the
 * replica is not ready, so the Service sends it nothing.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { TemplateProblem } from '../errors.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { Reflector, type ReflectorTuning } from '../kube-api/reflector.js';
import { problemLine, servedTemplateObjects, type ClusterCheck, type ObjectChecks } from '../pipeline/template-check.js';
import { cut } from '../quote.js';
import { sidecarTemplateResource } from '../templates/resource.js';
import { deliveredByPolicy, type TemplateSet } from '../templates/set.js';
import type { Template } from '../templates/template.js';
import type { TemplateSource } from '../templates/store.js';

export interface TemplateObjectsOptions extends ReflectorTuning {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** What the checks check about the cluster (its version, for a template's form). */
  readonly cluster?: () => ClusterCheck;
}

/** An object left out, and why (each problem as `check` prints it). */
export interface RefusedObject {
  readonly name: string;
  readonly generation?: number;
  readonly problems: readonly string[];
}

/** What /status shows about the templates. */
export interface TemplateObjectsStatus {
  readonly source: 'cluster';
  readonly synced: boolean;
  readonly generation: number;
  readonly loadedAt?: string;
  readonly templates: readonly string[];
  /** The templates the exported MutatingAdmissionPolicy delivers (delivery: policy), when any. */
  readonly deliveredByPolicy?: readonly string[];
  readonly refused: readonly RefusedObject[];
  /** Why no template is known yet (before the first list). */
  readonly unavailable?: string;
  readonly resourceVersion: string;
}

function emptySet(unavailable: string): TemplateSet {
  return Object.freeze({ templates: Object.freeze([]), byName: new Map(), unavailable });
}

/** What a set is, for telling a change from a repeat: every template's revision and role, and every refusal. */
function fingerprint(set: TemplateSet, refused: ReadonlyMap<string, readonly TemplateProblem[]>): string {
  // Who delivers a template, and whether a pod may opt out of it, are no part of its revision;
  // a change of either is a change of the set.
  const revision = (t: Template | undefined) =>
    t ? `${t.hash}${t.delivery === 'policy' ? '+policy' : ''}${t.optOut === 'allow' ? '' : `+opt-out-${t.optOut}`}` : '';
  const revisions = set.templates.map((t) => `${t.name}@${revision(t)}`);
  for (const rollout of set.rollouts?.values() ?? [])
    revisions.push(
      `${rollout.name}:${revision(rollout.candidate)}:${rollout.stanza ? JSON.stringify({ ...rollout.stanza, namespaces: [...(rollout.stanza.namespaces ?? [])] }) : ''}:${revision(rollout.previous)}`,
    );
  return JSON.stringify([revisions, [...refused.entries()].map(([name, problems]) => [name, problems.map(problemLine)])]);
}

/** Emits `reload` (set) on every new set, `refused` (RefusedObject) for each object newly left out, `rejected` (err) on a failed list or watch. */
export class TemplateObjects extends EventEmitter implements TemplateSource {
  private readonly objects = new Map<string, JsonObject>();
  private set: TemplateSet = emptySet('the SidecarTemplates have not been listed from the API server yet');
  private refused: ReadonlyMap<string, readonly TemplateProblem[]> = new Map();
  private seen = '';
  private generationCount = 0;
  private loadedAt: Date | undefined;
  private readonly reflector: Reflector<JsonObject>;
  private readonly memo: ObjectChecks = new Map();

  constructor(private readonly options: TemplateObjectsOptions) {
    super();
    this.reflector = new Reflector<JsonObject>({
      ...options,
      path: sidecarTemplateResource.path,
      what: 'sidecartemplate',
      replace: (items) => {
        this.objects.clear();
        for (const item of items) this.put(item);
        this.rebuild();
      },
      apply: (type, object) => {
        const name = nameOf(object);
        if (type === 'DELETED') this.objects.delete(name);
        else this.put(object);
        this.rebuild();
      },
    });
    this.reflector.on('rejected', (err: Error) => {
      if (this.set.unavailable !== undefined) this.set = emptySet(`the SidecarTemplates cannot be listed from the API server: ${cut(err.message, 300)}`);
      this.emit('rejected', err);
    });
  }

  start(): void {
    this.reflector.start();
  }

  stop(): void {
    this.reflector.stop();
  }

  /** False until the first list: a replica that knows no template takes no review. */
  ready(): boolean {
    return this.reflector.isSynced();
  }

  current(): TemplateSet {
    return this.set;
  }

  get generation(): number {
    return this.generationCount;
  }

  /** The objects as last seen (spec and status), by name. */
  stored(): ReadonlyMap<string, JsonObject> {
    return this.objects;
  }

  /** The objects left out, with their problems. */
  refusals(): ReadonlyMap<string, readonly TemplateProblem[]> {
    return this.refused;
  }

  status(): TemplateObjectsStatus {
    return {
      source: 'cluster',
      synced: this.reflector.isSynced(),
      generation: this.generationCount,
      ...(this.loadedAt ? { loadedAt: this.loadedAt.toISOString() } : {}),
      templates: this.set.templates.map((t) => `${t.name}@${t.hash}`),
      ...deliveredByPolicy(this.set),
      refused: [...this.refused.entries()].map(([name, problems]) => this.refusal(name, problems)),
      ...(this.set.unavailable !== undefined ? { unavailable: this.set.unavailable } : {}),
      resourceVersion: this.reflector.version(),
    };
  }

  private refusal(name: string, problems: readonly TemplateProblem[]): RefusedObject {
    const generation = this.objects.get(name)?.metadata;
    return {
      name,
      ...(isJsonObject(generation) && typeof generation.generation === 'number' ? { generation: generation.generation } : {}),
      problems: problems.slice(0, 20).map((p) => cut(problemLine(p), 500)),
    };
  }

  private put(object: JsonObject): void {
    const name = nameOf(object);
    if (name === '') return;
    this.objects.set(name, object);
  }

  private rebuild(): void {
    for (const name of this.memo.keys()) if (!this.objects.has(name)) this.memo.delete(name);
    const { set: served, refused: over } = servedTemplateObjects([...this.objects.values()], this.options.cluster?.() ?? {}, this.memo);
    // What admission reads of a refused object (its failurePolicy, its selectors) is part of the set.
    const seen = `${fingerprint(served, over)}${JSON.stringify(served.refusedRequired ?? [])}`;
    if (seen === this.seen && this.set.unavailable === undefined) return;
    const before = this.refused;
    this.seen = seen;
    this.set = served;
    this.refused = over;
    this.generationCount++;
    this.loadedAt = new Date();
    for (const [name, problems] of over) {
      const was = before.get(name);
      if (!was || JSON.stringify(was) !== JSON.stringify(problems)) this.emit('refused', this.refusal(name, problems));
    }
    this.emit('reload', this.set);
  }
}

function nameOf(object: JsonObject): string {
  return isJsonObject(object.metadata) && typeof object.metadata.name === 'string' ? object.metadata.name : '';
}
