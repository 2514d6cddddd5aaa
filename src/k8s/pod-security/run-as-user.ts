/** runAsUser (restricted, from v1.23): no runAsUser=0; from v1.35 user-namespaced pods are exempt. */
import { context, exceptFor, inUserNamespace, type PodSecurityCheck, type PodView } from './check.js';
import { setters } from './go-text.js';

function check({ podContext, containers }: PodView) {
  const root = containers.filter((c) => context(c).runAsUser === 0);
  const rootPod = podContext.runAsUser === 0;
  return rootPod || root.length > 0 ? { reason: 'runAsUser=0', detail: `${setters(rootPod, root).join(' and ')} must not set runAsUser=0` } : undefined;
}

export const runAsUser: PodSecurityCheck = {
  id: 'runAsUser',
  level: 'restricted',
  forbids: 'runAsUser=0',
  versions: [
    { since: 23, check },
    { since: 35, change: 'user-namespaced pods (hostUsers: false) exempt', check: exceptFor(inUserNamespace, check) },
  ],
};
