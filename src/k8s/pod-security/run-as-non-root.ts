/** runAsNonRoot (restricted): the pod or every container sets runAsNonRoot=true; from v1.35 user-namespaced pods are exempt. */
import { context, exceptFor, inUserNamespace, type PodSecurityCheck, type PodView } from './check.js';
import { containerList, present, setters } from './go-text.js';

function check({ podContext, containers }: PodView) {
  const podNonRoot = podContext.runAsNonRoot;
  const explicitRoot = containers.filter((c) => context(c).runAsNonRoot === false);
  if (podNonRoot === false || explicitRoot.length > 0)
    return {
      reason: 'runAsNonRoot != true',
      detail: `${setters(podNonRoot === false, explicitRoot).join(' and ')} must not set securityContext.runAsNonRoot=false`,
    };
  const unset = containers.filter((c) => !present(context(c).runAsNonRoot));
  if (podNonRoot !== true && unset.length > 0)
    return { reason: 'runAsNonRoot != true', detail: `pod or ${containerList(unset)} must set securityContext.runAsNonRoot=true` };
  return undefined;
}

export const runAsNonRoot: PodSecurityCheck = {
  id: 'runAsNonRoot',
  level: 'restricted',
  forbids: 'containers that may run as root (runAsNonRoot not true)',
  versions: [
    { since: 0, check },
    { since: 35, change: 'user-namespaced pods (hostUsers: false) exempt', check: exceptFor(inUserNamespace, check) },
  ],
};
