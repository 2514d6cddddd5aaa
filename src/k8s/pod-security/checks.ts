/** Every Pod Security check, one file each (upstream's registry): the evaluator and the reference read this list. */
import { allowPrivilegeEscalation } from './allow-privilege-escalation.js';
import { appArmorProfile } from './app-armor-profile.js';
import { capabilitiesBaseline } from './capabilities-baseline.js';
import { capabilitiesRestricted } from './capabilities-restricted.js';
import type { PodSecurityCheck } from './check.js';
import { goOrder } from './go-text.js';
import { hostNamespaces } from './host-namespaces.js';
import { hostPathVolumes } from './host-path-volumes.js';
import { hostPorts } from './host-ports.js';
import { hostProbesAndHostLifecycle } from './host-probes-and-host-lifecycle.js';
import { privileged } from './privileged.js';
import { procMountRestricted } from './proc-mount-restricted.js';
import { procMount } from './proc-mount.js';
import { restrictedVolumes } from './restricted-volumes.js';
import { runAsNonRoot } from './run-as-non-root.js';
import { runAsUser } from './run-as-user.js';
import { seLinuxOptions } from './se-linux-options.js';
import { seccompProfileBaseline } from './seccomp-profile-baseline.js';
import { seccompProfileRestricted } from './seccomp-profile-restricted.js';
import { sysctls } from './sysctls.js';
import { windowsHostProcess } from './windows-host-process.js';

const levelOrder = { baseline: 0, restricted: 1 } as const;

/** In upstream's order: baseline, then restricted, each by id in Go's string order. */
export const podSecurityChecks: readonly PodSecurityCheck[] = [
  allowPrivilegeEscalation,
  appArmorProfile,
  capabilitiesBaseline,
  capabilitiesRestricted,
  hostNamespaces,
  hostPathVolumes,
  hostPorts,
  hostProbesAndHostLifecycle,
  privileged,
  procMount,
  procMountRestricted,
  restrictedVolumes,
  runAsNonRoot,
  runAsUser,
  seLinuxOptions,
  seccompProfileBaseline,
  seccompProfileRestricted,
  sysctls,
  windowsHostProcess,
].sort((a, b) => levelOrder[a.level] - levelOrder[b.level] || goOrder(a.id, b.id));
