/** A real HTTPS injector on 127.0.0.1:0 with a throw-away certificate, and a client for it. */
import type { TemplateAdmissionDeps } from '../../src/admission/validate-templates.js';
import { decideVersion, type KubernetesVersion } from '../../src/k8s/version.js';
import type { PodSecurityAction } from '../../src/pipeline/pod-security-fit.js';
import type { AdmissionEvent } from '../../src/pipeline/admission-events.js';
import { createReviewer, type MutateDeps } from '../../src/admission/mutate.js';
import { servingReviewer } from '../../src/reviewer.js';
import https from 'node:https';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createApp } from '../../src/app.js';
import type { Liveness } from '../../src/liveness.js';
import { createMetrics, type Metrics } from '../../src/metrics.js';
import type { NamespaceLabelSource } from '../../src/namespaces/source.js';
import { optedIn } from './pods.js';
import type { Clock } from '../../src/clock.js';
import { defaultTimeouts, startServer, type RunningServer, type ServerTimeouts } from '../../src/server.js';
import type { TemplateSet } from '../../src/templates/set.js';
import { createCertificates, type CertificateBundle } from '../../src/tls/certificates.js';
import { httpsCall } from './https.js';

let certificates: Promise<CertificateBundle> | undefined;
/** One certificate bundle per test process. */
export function testCertificates(): Promise<CertificateBundle> {
  certificates ??= createCertificates(['localhost'], ['127.0.0.1'], 1);
  return certificates;
}

/** Namespaces used by the tests: `shop` and `default` opted in, `plain` not. */
export const testNamespaces = optedIn('shop', 'default', 'test', 'kube-public');

export interface TestServer extends RunningServer {
  readonly url: string;
  readonly agent: https.Agent;
  /** Parsed log lines written so far. */
  readonly logs: Record<string, unknown>[];
  readonly metrics: Metrics;
  ready: boolean;
  request(
    method: string,
    path: string,
    body?: string | Buffer,
    headers?: Record<string, string>,
  ): Promise<{ status: number; headers: Record<string, unknown>; text: string; json: any }>;
  post(body: unknown, path?: string): Promise<{ status: number; json: any }>;
  stop(): Promise<void>;
}

/** Starts the injector over HTTPS on an ephemeral loopback port. */
export async function startTestServer(options: {
  templates: TemplateSet | (() => TemplateSet);
  namespaces?: NamespaceLabelSource;
  maxBodyBytes?: number;
  maxBodyBytesInFlight?: number;
  maxConnections?: number;
  maxHandshakes?: number;
  /** CA certificates (PEM): reviews only for callers with a client certificate it signed, as `serve --client-ca`. */
  clientCa?: string;
  maxHandshakesPerSource?: number;
  timeouts?: Partial<ServerTimeouts>;
  liveness?: Liveness;
  /** The Kubernetes version served for (`--kubernetes-version`); absent: unknown, current features. */
  kubernetesVersion?: KubernetesVersion;
  podSecurity?: PodSecurityAction;
  events?: { record(event: AdmissionEvent): void };
  /** Remember answers for pods of one ReplicaSet, as serve does. @default true */
  answerCache?: boolean;
  /** The server's clock (the write-timeout sweep, the body budget's upload rates). @default systemClock */
  clock?: Clock;
  /** Serve SidecarTemplate admission (POST /validate/sidecartemplates) over these stored objects. */
  templateAdmission?: TemplateAdmissionDeps;
}): Promise<TestServer> {
  const certs = await testCertificates();
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) logs.push(JSON.parse(line));
      done();
    },
  });
  const state = { ready: true };
  const metrics = createMetrics();
  const decide: MutateDeps = {
    templates: typeof options.templates === 'function' ? options.templates : () => options.templates as TemplateSet,
    namespaces: options.namespaces ?? testNamespaces,
    ...(options.kubernetesVersion
      ? {
          kubernetesVersion: (
            (decision) => () =>
              decision
          )(decideVersion({ flag: options.kubernetesVersion })),
        }
      : {}),
    ...(options.podSecurity ? { podSecurity: options.podSecurity } : {}),
  };
  // The template set's generation: a new number for each set object the test hands in.
  const setGenerations = new WeakMap<TemplateSet, number>();
  let sets = 0;
  const generationOfSet = (set: TemplateSet): number => {
    let generation = setGenerations.get(set);
    if (generation === undefined) setGenerations.set(set, (generation = ++sets));
    return generation;
  };
  const reviewer =
    options.answerCache === false ? createReviewer(decide) : servingReviewer({ ...decide, generation: () => String(generationOfSet(decide.templates())) });
  const app = createApp({
    log: pino({ level: 'info' }, sink),
    metrics,
    maxBodyBytes: options.maxBodyBytes ?? 7 * 1024 * 1024,
    ...(options.maxBodyBytesInFlight ? { maxBodyBytesInFlight: options.maxBodyBytesInFlight } : {}),
    ...(options.liveness ? { liveness: options.liveness } : {}),
    reviewer,
    ...(options.events ? { events: options.events } : {}),
    isReady: () => state.ready,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.clientCa ? { requireClientCertificate: true } : {}),
    ...(options.templateAdmission ? { templateAdmission: options.templateAdmission } : {}),
  });
  const running = await startServer(app.callback(), {
    host: '127.0.0.1',
    port: 0,
    key: certs.key,
    cert: certs.cert,
    timeouts: { ...defaultTimeouts, ...options.timeouts },
    ...(options.maxConnections ? { maxConnections: options.maxConnections } : {}),
    ...(options.maxHandshakes ? { maxHandshakes: options.maxHandshakes } : {}),
    ...(options.clientCa ? { clientCa: options.clientCa } : {}),
    ...(options.maxHandshakesPerSource ? { maxHandshakesPerSource: options.maxHandshakesPerSource } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const agent = new https.Agent({ keepAlive: true, ca: certs.caCert, maxSockets: 32 });
  const url = `https://127.0.0.1:${running.port}`;
  const request: TestServer['request'] = async (method, path, body, headers = {}) => {
    const answer = await httpsCall({ port: running.port, agent, method, path, headers, ...(body === undefined ? {} : { body }) });
    let json: unknown;
    try {
      json = JSON.parse(answer.text);
    } catch {
      json = undefined;
    }
    return { status: answer.status, headers: answer.headers, text: answer.text, json };
  };
  const server: TestServer = {
    ...running,
    url,
    agent,
    logs,
    metrics,
    get ready() {
      return state.ready;
    },
    set ready(value: boolean) {
      state.ready = value;
    },
    request,
    post: (body, path = '/mutate?timeout=10s') => request('POST', path, JSON.stringify(body), { 'content-type': 'application/json' }),
    stop: async () => {
      agent.destroy();
      running.server.closeAllConnections();
      await running.close();
    },
  };
  return server;
}
