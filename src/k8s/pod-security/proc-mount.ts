/** procMount (baseline): no procMount but Default; from v1.35 user-namespaced pods are exempt. */
import { context, exceptFor, inUserNamespace, type PodSecurityCheck, type PodView } from './check.js';
import { containerList, joinQuote, present, sortedSet, str } from './go-text.js';

/** Any procMount but Default (upstream's procMount_1_0, which procMount_restricted also runs). */
export function procMountFailure({ containers }: PodView) {
  const types: string[] = [];
  const badContainers = containers.filter((c) => {
    const type = context(c).procMount;
    if (!present(type) || type === 'Default') return false;
    types.push(str(type));
    return true;
  });
  if (badContainers.length === 0) return undefined;
  return { reason: 'procMount', detail: `${containerList(badContainers)} must not set securityContext.procMount to ${joinQuote(sortedSet(types))}` };
}

export const procMount: PodSecurityCheck = {
  id: 'procMount',
  level: 'baseline',
  forbids: 'an unmasked /proc (procMount other than Default)',
  versions: [
    { since: 0, check: procMountFailure },
    { since: 35, change: 'user-namespaced pods (hostUsers: false) exempt', check: exceptFor(inUserNamespace, procMountFailure) },
  ],
};
