/** sysctls (baseline): only the safe sysctls, a set that grew with the policy versions. */
import type { PodSecurityCheck, PodView } from './check.js';
import { list, str } from './go-text.js';

function checkAllowing(safe: ReadonlySet<string>) {
  return ({ podContext }: PodView) => {
    const sysctls = list(podContext.sysctls)
      .map((s) => str(s.name))
      .filter((n) => !safe.has(n));
    return sysctls.length === 0 ? undefined : { reason: 'forbidden sysctls', detail: sysctls.join(', ') };
  };
}

const v1_0 = [
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_unprivileged_port_start',
];
const v1_27 = [...v1_0, 'net.ipv4.ip_local_reserved_ports'];
const v1_29 = [...v1_27, 'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes'];
const v1_32 = [...v1_29, 'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'];
const v1_37 = [...v1_32, 'net.ipv4.tcp_slow_start_after_idle', 'net.ipv4.tcp_notsent_lowat'];

export const sysctls: PodSecurityCheck = {
  id: 'sysctls',
  level: 'baseline',
  forbids: 'sysctls outside the safe set',
  versions: [
    { since: 0, check: checkAllowing(new Set(v1_0)) },
    { since: 27, change: 'net.ipv4.ip_local_reserved_ports safe', check: checkAllowing(new Set(v1_27)) },
    { since: 29, change: 'the net.ipv4.tcp_keepalive_* and tcp_fin_timeout sysctls safe', check: checkAllowing(new Set(v1_29)) },
    { since: 32, change: 'net.ipv4.tcp_rmem and tcp_wmem safe', check: checkAllowing(new Set(v1_32)) },
    { since: 37, change: 'net.ipv4.tcp_slow_start_after_idle and tcp_notsent_lowat safe', check: checkAllowing(new Set(v1_37)) },
  ],
};
