/**
 * What a V8 CPU profile (.cpuprofile) says: self time by function and by kind (our code by
 * folder, each npm package, Node's own modules, garbage collection, the rest), and the
 * inclusive time per review of the functions a review passes through. Used by
 * `npm run bench:profile` and by `npm run bench:cluster -- --profile DIR`.
 */
import { basename } from 'node:path';

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** What a frame is: our code, an npm package, Node itself, or a V8 pseudo-frame (GC, program, idle). */
function kindOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  // Our code by folder (the decision's stages live in pipeline, inject, templates, selection, k8s).
  const ours = /\/dist\/src\/([^/]+)\//.exec(url) ?? /\/dist\/src\/([^/]+)\.js/.exec(url);
  if (ours) return `sidecar-injector ${ours[1]}`;
  return 'other';
}

/**
 * Functions whose time with everything they call (inclusive) is given per review: the fresh
 * decision end to end (answerReview: parse, decide, answer text), the decision alone (decide:
 * admit, diff, patch), the body's parse and scan, and the log line and metrics (reviewed).
 * A function the JIT inlined everywhere has no frame of its own and shows no time.
 */
const inclusiveOf = ['answerReview', 'decide', 'admitPod', 'diff', 'parseJsonBytes', 'scanJsonText', 'readJsonBody', 'reviewed'];

/** The profile's self time by function (top `top`) and by kind, and the inclusive time per review of inclusiveOf, as text. */
export function summarise(profile: Profile, top: number, reviews: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<number, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(profile.samples[i]!, (self.get(profile.samples[i]!) ?? 0) + dt);
    total += dt;
  }
  const byFunction = new Map<string, number>();
  const byKind = new Map<string, number>();
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    const where = frame.url ? `${basename(frame.url)}:${frame.lineNumber + 1}` : '';
    const name = `${frame.functionName || '(anonymous)'} ${where}`.trim();
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const kind = kindOf(frame);
    byKind.set(kind, (byKind.get(kind) ?? 0) + us);
  }
  const busy = total - (byKind.get('(idle)') ?? 0);
  const pct = (us: number) => `${((us / busy) * 100).toFixed(1).padStart(5)} %`;
  const lines = [`busy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s sampled; shares are of busy time`, '', 'by kind:'];
  for (const [kind, us] of [...byKind].filter(([k]) => k !== '(idle)').sort((a, b) => b[1] - a[1])) lines.push(`  ${pct(us)}  ${kind}`);
  // Inclusive: a sample counts once for each named function on its stack (recursion once).
  const inclusive = new Map<string, number>(inclusiveOf.map((name) => [name, 0]));
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const name = byId.get(at)!.callFrame.functionName;
      if (inclusive.has(name) && !seen.has(name)) {
        seen.add(name);
        inclusive.set(name, inclusive.get(name)! + us);
      }
    }
  }
  lines.push('', `with what they call, per review (${reviews} reviews):`);
  for (const [name, us] of inclusive) lines.push(`  ${(us / reviews).toFixed(1).padStart(7)} µs  ${pct(us)}  ${name}`);
  lines.push('', `top ${top} functions by self time:`);
  for (const [name, us] of [...byFunction]
    .filter(([n]) => !n.startsWith('(idle)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top))
    lines.push(`  ${pct(us)}  ${name}`);
  return lines.join('\n');
}

/**
 * Where a replica's busy time goes per call, by what each sample's stack is doing: the first
 * rule (in this order) that any frame of the stack matches names it. What `npm run
 * bench:cluster -- --profile` prints for docs/performance.md's account.
 */
const accountRules: readonly (readonly [string, (frame: ProfileNode['callFrame']) => boolean])[] = [
  ['idle', (f) => f.functionName === '(idle)'],
  ['the answer written to the socket (res.end: TLS, the writev system call)', (f) => f.functionName === 'respond' && f.url.includes('koa')],
  ['the log line and the metrics', (f) => f.functionName === 'reviewed'],
  ['the decision under answerReview (scan, parse, decide, answer text)', (f) => f.functionName === 'answerReview'],
  ['the body read', (f) => f.functionName === 'readJsonBody'],
  ['the continuous audit (watch events)', (f) => /pod-auditor|continuous|reflector|watch\.js/.test(f.url)],
  ['the leader election, Events, other API calls', (f) => /lease\.js|events\.js|request\.js|client-node/.test(f.url)],
  ['the profiler itself', (f) => f.url === 'node:inspector'],
  ['koa and the router', (f) => /node_modules\/(koa|@koa|koa-compose)\//.test(f.url)],
  ['HTTP parsing and TLS reads', (f) => /_http_server|_http_common|node:tls|_tls_wrap|stream_base_commons/.test(f.url) || f.functionName === 'onStreamRead'],
  ['garbage collection', (f) => f.functionName === '(garbage collector)'],
];

export function account(profile: Profile, calls: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const totals = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const frames: ProfileNode['callFrame'][] = [];
    for (let at: number | undefined = profile.samples[i]!; at !== undefined; at = parent.get(at)) frames.push(byId.get(at)!.callFrame);
    const label = accountRules.find(([, test]) => frames.some(test))?.[0] ?? 'the rest (the decision after its awaits, V8, microtasks, timers)';
    totals.set(label, (totals.get(label) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  totals.delete('idle');
  const busy = [...totals.values()].reduce((a, b) => a + b, 0);
  const lines = [`busy ${(busy / 1e3).toFixed(0)} ms over ${calls} calls: ${(busy / calls / 1e3).toFixed(3)} ms per call`];
  for (const [label, us] of [...totals].sort((a, b) => b[1] - a[1]))
    lines.push(`  ${(us / calls / 1e3).toFixed(3).padStart(6)} ms/call ${((100 * us) / busy).toFixed(1).padStart(5)} %  ${label}`);
  return lines.join('\n');
}
