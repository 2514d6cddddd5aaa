/**
 * Stage 3, parameters: each template's declared parameters resolved from its defaults, the
 * namespace's overrides and the pod's (the pod's own annotations, not those we added); a value
 * outside its declaration on the pod refuses the pod.
 */
import { cut } from '../../quote.js';
import { nearestName } from '../../k8s/schema-fields.js';
import type { ParamValue } from '../../templates/placeholders.js';
import { overrideDomain, overridesByTemplate, resolveParameters, type ResolvedParameters } from '../overrides.js';
import { say } from '../reasons.js';
import { warning } from '../warnings.js';
import { denied, done, type AdmitDeps, type PodOutcome, type Progress, type Step } from './outcome.js';
import type { Selected } from './select.js';

export interface Parameterised {
  readonly selected: Selected;
  /** Each template's overridden values (undefined: its defaults). */
  readonly overrides: ReadonlyMap<string, Readonly<Record<string, ParamValue>> | undefined>;
  /** What every later outcome says: `common` with this webhook's templates and their parameters. */
  readonly mine: Selected['common'] & Pick<PodOutcome, 'templates' | 'parameters'>;
}

export function resolveOverrides(s: Selected, deps: AdmitDeps, at: Progress): Step<Parameterised> {
  const fromPod = overridesByTemplate(s.prepared.own.annotations);
  const fromNamespace = overridesByTemplate(deps.namespaces.overridesOf?.(at.namespace) ?? {});
  let suggested = 0;
  for (const [name, values] of fromPod) {
    if (s.set.byName.has(name)) continue;
    // A typo gets the nearest name; a pod naming hundreds of templates gets no search for each (the answer keeps 20 warnings).
    const near = suggested++ < 3 ? nearestName(name, [...s.set.byName.keys()]) : undefined;
    const [parameter = ''] = values.keys();
    s.warnings.push(
      warning(
        'override-ignored',
        `annotation ${cut(`${name}${overrideDomain}${parameter}`, 120)} names no template here${near ? ` (did you mean ${near}?)` : ''}; ignored`,
      ),
    );
  }
  const overrides = new Map<string, Readonly<Record<string, ParamValue>> | undefined>();
  const parameters = new Map<string, ResolvedParameters['explained']>();
  for (const template of s.ours) {
    const resolved = resolveParameters(template, fromNamespace.get(template.name), fromPod.get(template.name));
    if (resolved.denial) return done(denied(at, 'invalid-override', say('invalid-override', resolved.denial), s.ours));
    s.warnings.push(...resolved.warnings.map((text) => warning('override-ignored', text, template.name)));
    overrides.set(template.name, resolved.overrides);
    if (resolved.explained.length > 0) parameters.set(template.name, resolved.explained);
  }
  // The other webhook's templates in the ledger: their overrides too, so that a ledger this call
  // writes records them as the call that injected them did (the pod's claim of them is never carried).
  for (const name of Object.keys(s.prepared.ledger.carried.templates)) {
    const template = s.set.byName.get(name);
    if (!template || overrides.has(name)) continue;
    const resolved = resolveParameters(template, fromNamespace.get(name), fromPod.get(name));
    if (!resolved.denial) overrides.set(name, resolved.overrides);
  }
  const mine = { ...s.common, templates: s.ours, ...(parameters.size > 0 ? { parameters } : {}) };
  return { next: { selected: s, overrides, mine } };
}
