/**
 * What the commands that read the cluster's SidecarTemplates make of them: the set the replicas
 * serve — a refused required template refusing the pods it may apply to, a candidate taking pods
 * only where its status says the replicas let it.
 */
import test, { type ExecutionContext } from 'ava';
import { templatesInForce } from '../src/cli/cluster-reads.js';
import { admitPod } from '../src/pipeline/admit.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { optedIn } from './helpers/pods.js';
import { applyExamples, bareExampleText, revisionManifestText } from './helpers/templates.js';

async function api(t: ExecutionContext) {
  const server = new FakeApiServer();
  await server.start();
  t.teardown(() => server.stop());
  applyExamples(server);
  return server;
}

test('a stored required template that fails a check refuses the pods it may apply to, as on the replicas', async (t) => {
  const server = await api(t);
  server.applyTemplate('agent', { containers: [{ name: 'agent', image: 'agent:1', imagePullPolicy: 'Sometimes' }] });
  const inForce = await templatesInForce(await server.kubeConfig(), undefined);
  t.deepEqual(
    inForce.refused.map((r) => r.name),
    ['agent'],
  );
  t.deepEqual(
    inForce.set.refusedRequired?.map((r) => r.object),
    ['agent'],
  );
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'shop' }, spec: { containers: [{ name: 'app', image: 'app:1' }] } };
  const outcome = await admitPod({ pod, namespace: 'shop', name: '' }, { templates: () => inForce.set, namespaces: optedIn('shop') });
  t.is(outcome.decision, 'denied');
  t.is(outcome.reason, 'required-template-refused');
});

test("a candidate takes pods in a command's prediction only where its status, current for its generation and revision, says Candidate", async (t) => {
  const server = await api(t);
  server.applyTemplateText(
    revisionManifestText(bareExampleText('log-shipper').replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 'log-shipper-next', { role: 'candidate', share: 100 }),
  );
  const kubeConfig = await server.kubeConfig();
  const stoppedWhy = async () => (await templatesInForce(kubeConfig, undefined)).set.rollouts!.get('log-shipper')!.stopped;
  // No status yet: the replicas have not let it take pods.
  t.regex((await stoppedWhy())!, /has no status for this revision yet/);
  const revision = (await templatesInForce(kubeConfig, undefined)).set.rollouts!.get('log-shipper')!.candidate!.hash;
  const object = server.sidecarTemplates.get('log-shipper-next')!;
  const generation = object.metadata.generation;
  object.status = { revision, observedGeneration: generation, state: 'Candidate' };
  t.is(await stoppedWhy(), undefined);
  object.status = { revision, observedGeneration: generation, state: 'Stopped', message: 'takes no pod: halted: 3 of 3 pods with the candidate are unhealthy' };
  t.is(await stoppedWhy(), 'takes no pod: halted: 3 of 3 pods with the candidate are unhealthy');
  // A status of another revision or generation says nothing of this one.
  object.status = { revision: 'f00f00f00f00', observedGeneration: generation, state: 'Candidate' };
  t.regex((await stoppedWhy())!, /no status for this revision/);
  object.status = { revision, observedGeneration: generation - 1, state: 'Candidate' };
  t.regex((await stoppedWhy())!, /no status for this revision/);
});
