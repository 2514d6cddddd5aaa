/**
 * Each template in the form the pod and the cluster can run (templates/forms.ts), or left out
 * by a rule. Native sidecars run from Kubernetes 1.29; below, a native sidecar loses
 * `restartPolicy: Always` and the pod hangs in Init (kubernetes/enhancements KEP-753), so each
 * template's declared fallback applies. A pod that runs to completion ends only when all its
 * containers end: a sidecar that runs until stopped is never one of its ordinary containers,
 * so there it is a native sidecar, or left out where the cluster has none. Pure: a plan per review.
 */
import { formatVersion, nativeSidecarsSince, supportsNativeSidecars, type VersionDecision } from '../k8s/version.js';
import type { Ledger } from '../inject/ledger.js';
import { movedBy, runsUntilStopped, templateInForm } from '../templates/forms.js';
import type { Template, TemplateForm } from '../templates/template.js';
import { clusterWarning } from './cluster-warnings.js';
import type { LeftOutRule } from './decision.js';
import { warning, type Warning } from './warnings.js';

/** A template left out by the plan, with its rule and sentence. */
export interface LeftOut {
  readonly template: Template;
  readonly rule: LeftOutRule;
  readonly text: string;
}

/** The templates to inject, in the form to inject them; those left out; or the template that denies the pod. */
export interface FormPlan {
  readonly templates: readonly Template[];
  readonly leftOut: readonly LeftOut[];
  readonly warnings: readonly Warning[];
  /** Set when a template's fallback is `deny`: the sentence of the denial. */
  readonly denial?: { readonly template: string; readonly message: string };
}

/** Which containers the pod holds, by list and name. */
export type HeldContainers = (list: 'containers' | 'initContainers', name: string) => boolean;

/** The names of the containers `template` in `form` puts into the pod's `containers` list. */
function ordinaryIn(template: Template, form: TemplateForm): readonly string[] {
  const ordinary = movedBy(template, 'sidecar').names;
  if (form === 'sidecar') return [];
  return form === 'container' ? [...template.nativeSidecars, ...ordinary] : ordinary;
}

/**
 * The form a believed ledger entry recorded, when the pod really holds a container that form
 * places (trust.ts checked the claim, but keeps a claimed item the pod no longer holds, to add it
 * back): a second call keeps it whatever the version says by then. In a pod that runs to
 * completion a recorded form stands only when every ordinary container it places is already
 * there: it never adds a container that never exits.
 */
function recordedForm(template: Template, believed: Ledger, holds: HeldContainers, completion: string | undefined): TemplateForm | undefined {
  const recorded = Object.hasOwn(believed.templates, template.name) ? believed.templates[template.name]! : undefined;
  if (!recorded) return undefined;
  const form = recorded.form ?? 'native';
  // The containers the form places, by list: the pod must hold one of them, in that list.
  const ordinary = ordinaryIn(template, form);
  const native = form === 'container' ? [] : form === 'sidecar' ? [...template.nativeSidecars, ...movedBy(template, 'sidecar').names] : template.nativeSidecars;
  const held =
    ordinary.some((n) => recorded.containers?.includes(n) && holds('containers', n)) ||
    native.some((n) => recorded.initContainers?.includes(n) && holds('initContainers', n));
  if (!held) return undefined;
  if (completion && !template.endsOnItsOwn && ordinary.some((n) => !holds('containers', n))) return undefined;
  return form;
}

/**
 * Decides each template's form. `completion` says why the pod runs to completion
 * (k8s/pod.ts runsToCompletion), if it does.
 */
export function planForms(
  templates: readonly Template[],
  version: VersionDecision | undefined,
  believed: Ledger,
  completion: string | undefined,
  holds: HeldContainers,
): FormPlan {
  const out: Template[] = [];
  const leftOut: LeftOut[] = [];
  const warnings: Warning[] = [];
  const native = supportsNativeSidecars(version?.version);
  const at = version?.version ? `Kubernetes ${formatVersion(version.version)}` : '';
  for (const template of templates) {
    const recorded = recordedForm(template, believed, holds, completion);
    if (recorded) {
      out.push(templateInForm(template, recorded));
      continue;
    }
    const longRunning = completion !== undefined && runsUntilStopped(template);
    if (native) {
      out.push(longRunning ? templateInForm(template, 'sidecar') : template);
      continue;
    }
    if (longRunning) {
      leftOut.push({ template, rule: 'runs-to-completion', text: clusterWarning('native-sidecars-run-to-completion', template.name, at, completion) });
      continue;
    }
    if (template.nativeSidecars.length === 0) {
      out.push(template);
      continue;
    }
    switch (template.nativeSidecarFallback) {
      case 'deny':
        return {
          templates: [],
          leftOut,
          warnings,
          denial: {
            template: template.name,
            message: `template ${template.name} needs native sidecars (Kubernetes ${formatVersion(nativeSidecarsSince)}+) and the cluster runs ${at}: ${version!.reason}; its fallback is deny`,
          },
        };
      case 'skip':
        leftOut.push({ template, rule: 'native-sidecars-unsupported', text: clusterWarning('native-sidecars-skipped', template.name, at) });
        continue;
      case 'container':
        if (completion) {
          leftOut.push({ template, rule: 'runs-to-completion', text: clusterWarning('native-sidecars-run-to-completion', template.name, at, completion) });
          continue;
        }
        warnings.push(
          warning(
            'native-sidecars-as-containers',
            clusterWarning('native-sidecars-as-containers', template.name, at, template.nativeSidecars.join(', ')),
            template.name,
          ),
        );
        out.push(templateInForm(template, 'container'));
    }
  }
  return { templates: out, leftOut, warnings };
}
