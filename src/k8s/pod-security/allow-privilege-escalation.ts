/** allowPrivilegeEscalation (restricted, from v1.8): every container sets allowPrivilegeEscalation=false. */
import { context, exceptFor, isWindows, type PodSecurityCheck, type PodView } from './check.js';
import { containerList } from './go-text.js';

function check({ containers }: PodView) {
  const escalating = containers.filter((c) => context(c).allowPrivilegeEscalation !== false);
  if (escalating.length === 0) return undefined;
  return { reason: 'allowPrivilegeEscalation != false', detail: `${containerList(escalating)} must set securityContext.allowPrivilegeEscalation=false` };
}

export const allowPrivilegeEscalation: PodSecurityCheck = {
  id: 'allowPrivilegeEscalation',
  level: 'restricted',
  forbids: 'allowPrivilegeEscalation not set to false',
  versions: [
    { since: 8, check },
    { since: 25, change: 'Windows pods exempt', check: exceptFor(isWindows, check) },
  ],
};
