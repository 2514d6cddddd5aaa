/**
 * The template set in force, and hot reload. The directory is watched (a mounted ConfigMap
 * changes by swapping its `..data` symlink) and checked periodically; a changed directory is
 * read and the *whole* new set validated before it replaces the old one in a single
 * assignment, so a review sees either the old set or the new one, never a mix. A broken set
 * is refused: the last good set stays in use, and the failure is logged, counted and shown
 * on /status until the directory is fixed.
 */
import { createHash } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { Reloadable } from '../reloadable.js';
import { TemplateError } from '../errors.js';
import { WatchedFiles } from '../fs/watched-check.js';
import { compileTemplateFiles, readTemplateFiles, type TemplateFile } from './load.js';
import { deliveredByPolicy, type TemplateSet } from './set.js';

/** What /status shows about templates. */
export interface TemplateStatus {
  readonly dir: string;
  readonly generation: number;
  readonly loadedAt: string;
  readonly templates: readonly string[];
  /** The templates the exported MutatingAdmissionPolicy delivers (delivery: policy), when any. */
  readonly deliveredByPolicy?: readonly string[];
  /** Set while the directory holds a set that was refused. */
  readonly lastError?: { readonly at: string; readonly message: string };
}

function fingerprint(files: readonly TemplateFile[]): string {
  const hash = createHash('sha256');
  for (const file of files) hash.update(file.name).update('\0').update(file.text).update('\0');
  return hash.digest('hex');
}

/**
 * Where the running injector reads its templates: a folder (TemplateStore, for a local run) or
 * the cluster's SidecarTemplate objects (serving/template-objects.ts). Emits `reload` (set).
 */
export interface TemplateSource extends Pick<EventEmitter, 'on' | 'off' | 'once'> {
  /** The set in use. */
  current(): TemplateSet;
  /** Moves on every new set. */
  readonly generation: number;
  status(): unknown;
}

/** Validates and compiles template files; throws TemplateError listing every problem. */
export type TemplateCompiler = (files: readonly TemplateFile[], dir: string) => TemplateSet | Promise<TemplateSet>;

/** Holds the template set in use. Emits `reload` (set) and `rejected` (error). */
export class TemplateStore extends WatchedFiles implements Reloadable<TemplateSet, TemplateStatus> {
  private set: TemplateSet;
  private generationCount = 1;
  private loadedAt = new Date();
  private lastSeen: string;
  private lastError: { at: string; message: string } | undefined;

  private constructor(
    readonly dir: string,
    files: readonly TemplateFile[],
    set: TemplateSet,
    private readonly compile: TemplateCompiler,
    intervalMs: number,
  ) {
    super([dir], intervalMs);
    this.set = set;
    this.lastSeen = fingerprint(files);
  }

  /**
   * Loads the directory; throws TemplateError when the first set is invalid (nothing to fall
   * back to). `compile` validates and compiles a set, at start and on every reload (`serve`
   * passes the full `check`).
   */
  static async load(dir: string, compile: TemplateCompiler = compileTemplateFiles, intervalMs = 5000): Promise<TemplateStore> {
    const files = await readTemplateFiles(dir);
    return new TemplateStore(dir, files, await compile(files, dir), compile, intervalMs);
  }

  /** The set in use. */
  current(): TemplateSet {
    return this.set;
  }

  get generation(): number {
    return this.generationCount;
  }

  status(): TemplateStatus {
    return {
      dir: this.dir,
      generation: this.generationCount,
      loadedAt: this.loadedAt.toISOString(),
      templates: this.set.templates.map((t) => `${t.name}@${t.hash}`),
      ...deliveredByPolicy(this.set),
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }

  protected async checkOnce(): Promise<void> {
    let files: TemplateFile[];
    try {
      files = await readTemplateFiles(this.dir);
    } catch (err) {
      const seen = `unreadable:${(err as Error).message}`;
      if (seen !== this.lastSeen) this.reject(err as Error, seen);
      return;
    }
    const seen = fingerprint(files);
    if (seen === this.lastSeen) return;
    this.lastSeen = seen;
    let set: TemplateSet;
    try {
      set = await this.compile(files, this.dir);
    } catch (err) {
      return this.reject(err as Error, seen);
    }
    // One assignment: a review reads either the old set or the new one.
    this.set = set;
    this.generationCount++;
    this.loadedAt = new Date();
    this.lastError = undefined;
    this.emit('reload', set);
  }

  private reject(err: Error, seen: string): void {
    this.lastSeen = seen;
    const message = err instanceof TemplateError ? err.message : `cannot read the templates: ${err.message}`;
    this.lastError = { at: new Date().toISOString(), message };
    this.emit('rejected', err);
  }
}
