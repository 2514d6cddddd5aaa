/** hostPorts (baseline): no container port bound on the host. */
import type { PodSecurityCheck, PodView } from './check.js';
import { containerList, list, pluralize, present, sortedSet, str } from './go-text.js';

function check({ containers }: PodView) {
  const ports: string[] = [];
  const badContainers = containers.filter((c) => {
    const hostPorts = list(c.ports)
      .map((p) => p.hostPort)
      .filter((p) => present(p) && p !== 0);
    ports.push(...hostPorts.map(str));
    return hostPorts.length > 0;
  });
  if (badContainers.length === 0) return undefined;
  const distinct = sortedSet(ports);
  return {
    reason: 'hostPort',
    detail: `${containerList(badContainers)} ${pluralize('uses', 'use', badContainers.length)} ${pluralize('hostPort', 'hostPorts', distinct.length)} ${distinct.join(', ')}`,
  };
}

export const hostPorts: PodSecurityCheck = {
  id: 'hostPorts',
  level: 'baseline',
  forbids: 'hostPort on any container port',
  versions: [{ since: 0, check }],
};
