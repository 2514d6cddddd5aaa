/** procMount_restricted (restricted, from v1.35): no procMount but Default, user-namespaced pods included. */
import type { PodSecurityCheck } from './check.js';
import { procMountFailure } from './proc-mount.js';

export const procMountRestricted: PodSecurityCheck = {
  id: 'procMount_restricted',
  level: 'restricted',
  forbids: 'an unmasked /proc, user-namespaced pods included',
  versions: [{ since: 35, overrides: ['procMount'], check: procMountFailure }],
};
