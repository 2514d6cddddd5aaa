/**
 * The continuous audit as a leader-only runnable: while this replica leads, the pod auditor
 * watches every pod's metadata and judges it, and judges every pod again when a namespace's
 * labels or the templates change — at most once a second (a full judgement of 100,000 pods
 * takes about 0.3 s of the event loop).
 */
import type { Clock, Timer } from '../clock.js';
import type { Runnable } from '../runtime/runnable.js';
import { PodAuditor, type PodAuditorOptions } from './pod-auditor.js';

/** What the audit hears from the namespace source: label changes, and relists (after 410 Gone) that may hide them. */
export interface NamespaceChanges {
  on(event: 'labels-changed' | 'reload', listener: () => void): unknown;
  off(event: 'labels-changed' | 'reload', listener: () => void): unknown;
}

export interface ContinuousAuditOptions extends PodAuditorOptions {
  readonly namespaces: NamespaceChanges;
  readonly clock: Clock;
}

/** How long changes are gathered before every pod is judged again. */
const recountDelayMs = 1000;

export class ContinuousAudit implements Runnable {
  readonly name = 'auditor';
  private readonly auditor: PodAuditor;
  private running = false;
  private recount: Timer | undefined;
  private templatesChanged = false;
  private readonly labelsChanged = () => this.later(false);

  constructor(private readonly options: ContinuousAuditOptions) {
    this.auditor = new PodAuditor(options);
  }

  start(): void {
    this.running = true;
    this.options.namespaces.on('labels-changed', this.labelsChanged);
    this.options.namespaces.on('reload', this.labelsChanged);
    this.auditor.start();
  }

  stop(): void {
    this.running = false;
    this.recount?.cancel();
    this.recount = undefined;
    this.options.namespaces.off('labels-changed', this.labelsChanged);
    this.options.namespaces.off('reload', this.labelsChanged);
    this.auditor.stop();
  }

  /** The templates changed: every pod is judged again soon (nothing while this replica does not lead). */
  templatesReloaded(): void {
    this.later(true);
  }

  status(): ReturnType<PodAuditor['status']> {
    return this.auditor.status();
  }

  /** Pods per template and state; undefined until the pods are listed. */
  templateCounts(): ReturnType<PodAuditor['templateCounts']> | undefined {
    return this.auditor.status().synced ? this.auditor.templateCounts() : undefined;
  }

  private later(templates: boolean): void {
    this.templatesChanged ||= templates;
    if (!this.running || this.recount) return;
    this.recount = this.options.clock.after(recountDelayMs, () => {
      this.recount = undefined;
      if (!this.running) return;
      if (this.templatesChanged) this.auditor.templatesChanged();
      else this.auditor.recount();
      this.templatesChanged = false;
    });
  }
}
