/**
 * A cluster for the rollout's timers: a templates directory with candidates, the test API server
 * with its admission chain calling an injector over HTTPS (the set in force gated by the
 * preflights), and the rollout controller serve runs, on a fake clock, writing Events on the
 * candidates' SidecarTemplates. The caller drives the clock.
 */
import { parse } from 'yaml';
import { revisionManifestText } from './templates.js';
import type { ExecutionContext } from 'ava';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { RolloutController } from '../../src/rollout/controller.js';
import { createMetrics } from '../../src/metrics.js';
import { TemplateStore } from '../../src/templates/store.js';
import type { TemplateSet } from '../../src/templates/set.js';
import { AdmissionChain, type ChainWebhook } from './admission-chain.js';
import { FakeApiServer } from './fake-apiserver.js';
import { FakeClock } from './fake-clock.js';
import { optedIn } from './pods.js';
import { startTestServer } from './server.js';

/** `template` as the SidecarTemplate of a candidate of `share` percent (object NAME-next). */
export const candidateFile = (template: string, share: number) =>
  revisionManifestText(template, `${(parse(template) as { name: string }).name}-next`, { role: 'candidate', share });

export async function rolloutWorld(
  t: ExecutionContext,
  files: Readonly<Record<string, string>>,
  options: { haltAfter?: number; notReadyGraceMs?: number; injectorInChain?: boolean; webhookInChainAtStart?: ChainWebhook } = {},
) {
  const dir = await mkdtemp(join(tmpdir(), 'rollout-world-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  const templates = await TemplateStore.load(dir);
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  for (const ns of ['sidecar-injector', 'default', 'shop', 'probes']) api.create(ns);
  const chain = new AdmissionChain();
  api.admission = chain;
  const gate: { apply?: (set: TemplateSet) => TemplateSet } = {};
  const inForce = () => gate.apply?.(templates.current()) ?? templates.current();
  const namespaces = optedIn('shop', 'probes');
  const injector = await startTestServer({ templates: inForce, namespaces });
  t.teardown(() => injector.stop());
  if (options.webhookInChainAtStart) chain.webhooks.push(options.webhookInChainAtStart);
  else if (options.injectorInChain !== false) chain.webhooks.push({ name: 'all.sidecar-injector.io', port: injector.port, path: '/mutate?timeout=10s' });
  const clock = new FakeClock();
  const metrics = createMetrics();
  const kubeConfig = await api.kubeConfig();
  const rollout = new RolloutController({
    namespace: 'probes',
    haltAfter: options.haltAfter ?? 3,
    notReadyGraceMs: options.notReadyGraceMs ?? 5 * 60_000,
    kubeConfig,
    templates,
    log: pino({ level: 'silent' }),
    metrics,
    clock,
    instance: 'replica-1',
  });
  rollout.start();
  t.teardown(() => rollout.stop());
  gate.apply = (set) => rollout.gate(set);
  // serve begins once it listens; this world's injector listens already.
  rollout.begin();
  return { dir, templates, api, chain, injector, inForce, namespaces, clock, metrics, kubeConfig, rollout };
}
