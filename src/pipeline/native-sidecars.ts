/**
 * Native sidecars where the cluster runs them, and a declared fallback where it does not
 * (below Kubernetes 1.29 an init container with `restartPolicy: Always` loses the field and
 * the pod hangs in Init: CONTRACT R-70). Pure: a plan per review.
 */
import { formatVersion, nativeSidecarsSince, supportsNativeSidecars, type VersionDecision } from '../k8s/version.js';
import type { Ledger } from '../inject/ledger.js';
import { templateInForm } from '../templates/forms.js';
import type { Template } from '../templates/template.js';
import { clusterWarning } from './cluster-warnings.js';

/** The templates to inject, in the form to inject them, with what to say; or the template that denies the pod. */
export interface NativeSidecarPlan {
  readonly templates: readonly Template[];
  readonly warnings: readonly string[];
  /** Set when a template's fallback is `deny`: the sentence of the denial. */
  readonly denial?: { readonly template: string; readonly message: string };
}

/**
 * Decides each template's form. A template the (believed) ledger records keeps the form it
 * was injected in, so a second call changes nothing whatever the version says by then.
 * `completion` says why the pod runs to completion (k8s/pod.ts runsToCompletion), if it does.
 */
export function planNativeSidecars(
  templates: readonly Template[],
  version: VersionDecision | undefined,
  believed: Ledger,
  completion: string | undefined,
): NativeSidecarPlan {
  const out: Template[] = [];
  const warnings: string[] = [];
  for (const template of templates) {
    if (template.nativeSidecars.length === 0) {
      out.push(template);
      continue;
    }
    // The recorded form stands only where the pod holds a native sidecar in it (believed by
    // trust.ts): other believed items (a volume, a label) say nothing about the form.
    const recorded = Object.hasOwn(believed.templates, template.name) ? believed.templates[template.name]! : undefined;
    const list = recorded?.form === 'container' ? recorded.containers : recorded?.initContainers;
    if (recorded && template.nativeSidecars.some((name) => list?.includes(name))) {
      out.push(templateInForm(template, recorded.form ?? 'native'));
      continue;
    }
    if (supportsNativeSidecars(version?.version)) {
      out.push(template);
      continue;
    }
    const at = `Kubernetes ${formatVersion(version!.version!)}`;
    const names = template.nativeSidecars.join(', ');
    switch (template.nativeSidecarFallback) {
      case 'deny':
        return {
          templates: [],
          warnings,
          denial: {
            template: template.name,
            message: `template ${template.name} needs native sidecars (Kubernetes ${formatVersion(nativeSidecarsSince)}+) and the cluster runs ${at}: ${version!.reason}; its fallback is deny`,
          },
        };
      case 'skip':
        warnings.push(clusterWarning('native-sidecars-skipped', template.name, at));
        continue;
      case 'container':
        if (completion) {
          warnings.push(clusterWarning('native-sidecars-run-to-completion', template.name, at, completion));
          continue;
        }
        warnings.push(clusterWarning('native-sidecars-as-containers', template.name, at, names));
        out.push(templateInForm(template, 'container'));
    }
  }
  return { templates: out, warnings };
}
