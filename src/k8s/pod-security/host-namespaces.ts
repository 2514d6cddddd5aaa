/** hostNamespaces (baseline): no host network, PID or IPC namespace. */
import type { PodSecurityCheck, PodView } from './check.js';

function check({ spec }: PodView) {
  const hostNamespaces = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter((field) => spec[field] === true);
  return hostNamespaces.length === 0 ? undefined : { reason: 'host namespaces', detail: hostNamespaces.map((f) => `${f}=true`).join(', ') };
}

export const hostNamespaces: PodSecurityCheck = {
  id: 'hostNamespaces',
  level: 'baseline',
  forbids: 'hostNetwork, hostPID, hostIPC',
  versions: [{ since: 0, check }],
};
