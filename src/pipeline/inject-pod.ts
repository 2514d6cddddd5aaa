/**
 * The one face of injection: everything between "a pod and the templates in force" and "the
 * pod with its sidecars". `preparePod` reads the pod and its ledger and checks the ledger's
 * claims against the pod (what selection needs: the pod's own labels and annotations);
 * `injectTemplates` renders the chosen templates with the pod's values and injects them.
 * The webhook (admit.ts), `render`, `check` and the tests all go through these two.
 */
import type { JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { parsePod, type PodParts } from '../k8s/pod.js';
import { inject, ownMetadata, type Injection } from '../inject/inject.js';
import { indexLedger, parseLedger, type Ownership } from '../inject/ledger.js';
import { checkLedger, type CheckedLedger } from '../inject/trust.js';
import { contextFor, type OwnMetadata } from '../templates/context.js';
import { render } from '../templates/render.js';
import type { TemplateSet } from '../templates/set.js';
import type { Placement, Template } from '../templates/template.js';
import type { ParamValue } from '../templates/placeholders.js';

/** A pod read, with its ledger checked: what selection and injection need. */
export interface PreparedPod {
  readonly pod: JsonObject;
  readonly parts: PodParts;
  readonly ledger: CheckedLedger;
  readonly owner: Ownership;
  /** The pod's own labels and annotations: without those the believed ledger says are ours. */
  readonly own: OwnMetadata;
  /** Sentences about the ledger: malformed, or claims not believed. */
  readonly warnings: readonly string[];
  /** The templates the ledger names, believed or not (a claim: only for what no item can prove). */
  readonly claimed: ReadonlySet<string>;
  /** Where a template in force places its containers: the order sidecars keep (inject.ts placedAt). */
  readonly placementOf: (template: string) => Placement | undefined;
}

/**
 * Reads `pod` (throws AdmissionError when its shape cannot be injected into; `parts` when the
 * caller has read it already) and checks its ledger against it and the templates of `set`.
 */
export function preparePod(pod: unknown, set: TemplateSet, parts: PodParts = parsePod(pod)): PreparedPod {
  const { ledger: claimed, problem } = parseLedger(parts.annotations[AnnotationKeys.status]);
  // The ledger is a claim: only what the pod really holds of a template counts as ours.
  const ledger = checkLedger(claimed, parts, set);
  const owner = indexLedger(ledger.believed);
  return {
    pod: pod as JsonObject,
    parts,
    ledger,
    owner,
    own: ownMetadata(parts, owner),
    warnings: [...(problem ? [problem] : []), ...ledger.doubts],
    claimed: new Set(Object.keys(claimed.templates)),
    placementOf: (template) => set.byName.get(template)?.placement,
  };
}

/** Where the pod lives: its namespace and that namespace's labels, and the request's name. */
export interface PodPlace {
  readonly namespace: string;
  readonly namespaceLabels: Readonly<Record<string, string>>;
  /** `request.name` (empty for pods with generateName). @default '' */
  readonly requestName?: string;
}

/**
 * Renders `templates` with the pod's values (and each template's parameter overrides, by
 * template name) and injects them; never throws for any pod value.
 */
export function injectTemplates(
  prepared: PreparedPod,
  templates: readonly Template[],
  place: PodPlace,
  overrides?: ReadonlyMap<string, Readonly<Record<string, ParamValue>> | undefined>,
): Injection {
  const { pod, parts, ledger, owner, own, placementOf } = prepared;
  const context = contextFor(parts, place.requestName ?? '', place.namespace, own, place.namespaceLabels);
  const rendered = templates.map((t) => render(t, context, overrides?.get(t.name)));
  const recorded = (name: string) => {
    const values = overrides?.get(name);
    return values ? Object.fromEntries(Object.entries(values).map(([k, v]) => [k, String(v)])) : undefined;
  };
  return inject(pod, parts, ledger.carried, owner, rendered, ledger.sidecars, recorded, placementOf);
}

/** Both steps at once, for a pod whose templates are already chosen (`check`, tests). */
export function injectPod(pod: unknown, templates: readonly Template[], set: TemplateSet, place: PodPlace): Injection & { readonly prepared: PreparedPod } {
  const prepared = preparePod(pod, set);
  return { ...injectTemplates(prepared, templates, place), prepared };
}
