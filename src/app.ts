/**
 * The koa application: routes, middleware order, error answers, the per-review log line and
 * metrics. It never listens; the server module owns sockets and TLS. Route on the path only:
 * the API server appends `?timeout=10s` and strips a trailing slash.
 */
import type { TLSSocket } from 'node:tls';
import Koa from 'koa';
import Router from '@koa/router';
import type { Logger } from 'pino';
import type { Reviewer, Webhook } from './admission/mutate.js';
import { answerTemplateReview, type TemplateAdmissionDeps } from './admission/validate-templates.js';
import type { Clock } from './clock.js';
import { RequestError } from './errors.js';
import { BodyBudget, defaultMaxBodyBytesInFlight, readJsonBody, type BodyUpload } from './http/body.js';
import { createObserver } from './http/observe.js';
import { Liveness } from './liveness.js';
import { profileSeconds } from './http/cpu-profile.js';
import { cut } from './quote.js';
import type { AdmissionEvent } from './pipeline/admission-events.js';
import type { Metrics } from './metrics.js';

/**
 * The app's routes in three groups, each able to go to a listener of its own: the reviews (the
 * webhooks and SidecarTemplate admission, for the API server), the kubelet's probes, and what an
 * operator reads (`/metrics`, `/status`).
 */
export type RouteGroup = 'reviews' | 'probes' | 'operations';
export const allRouteGroups: ReadonlySet<RouteGroup> = new Set(['reviews', 'probes', 'operations']);

/** Where a request for a group's route is sent when another listener serves it. */
const servedOn: Readonly<Record<RouteGroup, string>> = {
  reviews: 'the webhook port (--port)',
  probes: 'the probe port (--probe-port)',
  operations: 'the metrics port (--metrics-port)',
};

/**
 * One path per webhook: /mutate injects every template (one webhook for all); the required and
 * the optional webhook (failurePolicy Fail and Ignore) each inject only their own templates.
 */
export const webhookPaths = [
  ['/mutate', 'all'],
  ['/mutate/required', 'required'],
  ['/mutate/optional', 'optional'],
] as const satisfies readonly (readonly [string, Webhook])[];

/** What the app needs; everything comes in as an argument. */
export interface AppDeps {
  /** What answers review bodies (admission/mutate.ts createReviewer, or a layer around it). */
  readonly reviewer: Reviewer;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Largest accepted body in bytes (413 above). */
  readonly maxBodyBytes: number;
  /** Sum of bodies held at once (503 above). @default defaultMaxBodyBytesInFlight */
  readonly maxBodyBytesInFlight?: number;
  /** Judges how fast uploads arrive (the body budget). @default systemClock */
  readonly clock?: Clock;
  /** True when the process can serve reviews (templates loaded, namespace source synced, not shutting down). */
  readonly isReady: () => boolean;
  /** True once shutdown has begun: answers carry `Connection: close` so clients move on. */
  readonly isDraining?: () => boolean;
  /** The JSON shown on GET /status. */
  readonly status?: () => unknown;
  /** Liveness: /healthz answers 503 while it reports problems. */
  readonly liveness?: Liveness;
  /**
   * True when reviews are answered only for callers whose client certificate the server verified
   * (`--client-ca`): any other caller is refused (401) before a byte of its body is read.
   */
  readonly requireClientCertificate?: boolean;
  /** What SidecarTemplate admission reads (POST /validate/sidecartemplates); without it, that path is not served. */
  readonly templateAdmission?: TemplateAdmissionDeps;
  /** With `--profiling on`: GET /debug/cpu-profile?seconds=N (operations) answers a CPU profile of the process. */
  readonly profiler?: { profile(seconds: number): Promise<unknown> };
  /** Where the Events of reviews go (kube-api/events.ts), written after each answer is sent. */
  readonly events?: { record(event: AdmissionEvent): void };
}

/** Refuses (401) a connection whose client certificate the server did not verify, saying why. */
function callerVerified(socket: TLSSocket): void {
  if (socket.authorized) return;
  const presented = Object.keys(socket.getPeerCertificate?.() ?? {}).length > 0;
  throw new RequestError(
    401,
    'ERR_CLIENT_CERTIFICATE',
    presented
      ? `reviews are answered only for the API server: the client certificate presented is not signed by the configured CA (${cut(String(socket.authorizationError ?? 'unverified'), 100)})`
      : 'reviews are answered only for the API server: no client certificate was presented (the API server presents one from its WebhookAdmission kubeConfigFile)',
  );
}

function sendError(ctx: Koa.Context, status: number, code: string, message: string): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify({ code, message });
}

/**
 * Creates the koa app serving the routes of `groups` (every one by default): `/mutate…` and
 * `/validate/sidecartemplates`, `/healthz` and `/readyz`, `/metrics` and `/status`. A request
 * for a route of another group is told which port serves it (404).
 */
export function createApp(deps: AppDeps, groups: ReadonlySet<RouteGroup> = allRouteGroups): Koa {
  const app = new Koa();
  const router = new Router();
  const { log, metrics } = deps;
  const liveness = deps.liveness ?? new Liveness();
  const observer = createObserver(log, metrics, liveness);
  // Every route is registered on every listener: one of a group served elsewhere answers 404
  // naming the port that serves it (the fallback below reads `ctx.state.servedOn`).
  const route = (group: RouteGroup, method: 'get' | 'post', path: string, handler: Koa.Middleware) =>
    groups.has(group)
      ? router[method](path, handler)
      : // Any method: the path is another port's, whatever is asked of it.
        router.all(path, (ctx) => {
          ctx.state.servedOn = servedOn[group];
        });

  const budget = new BodyBudget(deps.maxBodyBytesInFlight ?? defaultMaxBodyBytesInFlight, deps.clock);
  const { reviewer } = deps;
  for (const [path, webhook] of webhookPaths) {
    route('reviews', 'post', path, async (ctx) => {
      let upload: BodyUpload | undefined;
      if (deps.requireClientCertificate) callerVerified(ctx.req.socket as TLSSocket);
      try {
        const body = await readJsonBody(ctx.req, deps.maxBodyBytes, budget, (read) => (upload = read), reviewer.keyPaths);
        const started = process.hrtime.bigint();
        const { outcome, answer } = await reviewer.answer(body, webhook);
        // The header itself: the `type` setter looks the media type up every time.
        ctx.set('Content-Type', 'application/json');
        ctx.body = answer;
        observer.reviewed(outcome, Number(process.hrtime.bigint() - started) / 1e9, webhook);
        // After the answer has gone: an event never delays admission, and its failure is never felt there.
        const recorder = deps.events;
        if (recorder && outcome.events) ctx.res.once('finish', () => outcome.events!().forEach((e) => recorder.record(e)));
      } finally {
        upload?.release();
      }
    });
  }
  // SidecarTemplate creates and updates: every check of `check` before the API server stores one.
  const templateAdmission = deps.templateAdmission;
  if (templateAdmission)
    route('reviews', 'post', '/validate/sidecartemplates', async (ctx) => {
      let upload: BodyUpload | undefined;
      if (deps.requireClientCertificate) callerVerified(ctx.req.socket as TLSSocket);
      try {
        const body = await readJsonBody(ctx.req, deps.maxBodyBytes, budget, (read) => (upload = read));
        const { response, refused } = answerTemplateReview(body.json(), templateAdmission);
        ctx.set('Content-Type', 'application/json');
        ctx.body = JSON.stringify(response);
        metrics.templateReviews.inc({ decision: refused ? 'denied' : 'allowed' });
        if (refused) log.info({ uid: cut(response.response.uid, 64), message: response.response.status?.message }, 'SidecarTemplate refused');
      } finally {
        upload?.release();
      }
    });

  route('probes', 'get', '/healthz', async (ctx) => {
    const problems = await liveness.problems();
    if (problems.length > 0) {
      ctx.status = 503;
      ctx.body = { status: 'unhealthy', problems };
      log.error({ problems }, 'unhealthy: the kubelet should restart this replica');
      return;
    }
    ctx.body = { status: 'ok' };
  });
  route('probes', 'get', '/readyz', (ctx) => {
    const ready = deps.isReady();
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? 'ready' : 'not ready' };
  });
  route('operations', 'get', '/metrics', async (ctx) => {
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });
  route('operations', 'get', '/status', (ctx) => {
    ctx.body = { ready: deps.isReady(), ...((deps.status?.() as object | undefined) ?? {}) };
  });
  const { profiler } = deps;
  if (profiler)
    route('operations', 'get', '/debug/cpu-profile', async (ctx) => {
      const seconds = profileSeconds(typeof ctx.query.seconds === 'string' ? ctx.query.seconds : undefined);
      const profile = await profiler.profile(seconds);
      ctx.set('Content-Disposition', `attachment; filename="sidecar-injector-${seconds}s.cpuprofile"`);
      ctx.body = profile;
    });

  app.use(async (ctx, next) => {
    if (deps.isDraining?.()) ctx.set('Connection', 'close');
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        observer.misdirected('ERR_NOT_FOUND');
        const where = ctx.state.servedOn as string | undefined;
        sendError(
          ctx,
          404,
          'ERR_NOT_FOUND',
          where
            ? `no route for ${ctx.method} ${ctx.path} on this port: it is served on ${where}`
            : `no route for ${ctx.method} ${cut(ctx.path, 100)}; reviews go to ${groups.has('reviews') ? 'POST /mutate' : servedOn.reviews}`,
        );
      }
    } catch (err) {
      if (err instanceof RequestError) {
        if (err.status === 413 || err.status === 503 || err.status === 401) ctx.set('Connection', 'close');
        observer.refused(err.code, err.status, cut(ctx.path, 100), err.message);
        sendError(ctx, err.status, err.code, err.message);
        return;
      }
      const status = (err as { status?: unknown }).status;
      if (status === 405 || status === 501) {
        // 501 is the router's answer to a method it does not know at all; still the client's mistake.
        observer.misdirected('ERR_METHOD_NOT_ALLOWED');
        sendError(ctx, 405, 'ERR_METHOD_NOT_ALLOWED', `${cut(ctx.method, 20)} is not allowed on ${cut(ctx.path, 100)}`);
        return;
      }
      // A bug, not bad input: answer 500 so that the webhook's failurePolicy decides.
      observer.failed(err, ctx.path);
      sendError(ctx, 500, 'ERR_INTERNAL', 'internal error while handling the review; see the injector log');
    }
  });
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  // Errors are answered above; koa's default handler would print a second stack trace.
  app.silent = true;
  return app;
}
