/** Usage texts of the subcommands, kept apart so that `--help` loads no command code. */

export const renderUsage = `Usage: sidecar-injector render -f FILE|- [options]

  -f, --filename FILE          manifests to inject (- for stdin): YAML documents or JSON
  --templates DIR              template directory (default templates)
  --namespace NS               namespace for every object (default: each object's own, else default)
  --namespace-labels FILE      YAML map: namespace -> labels
  --namespace-label NS:K=V     one namespace label (repeatable)
                               with neither, every namespace counts as opted in
  --explain                    say on stderr, per object, what was injected or skipped and why

Pods, Deployments, StatefulSets, DaemonSets, ReplicaSets, ReplicationControllers, Jobs and
CronJobs are injected; other objects are written back unchanged.
`;

export const checkUsage = `Usage: sidecar-injector check [DIR]

Validates the templates in DIR (default templates): every file, the kustomization.yaml that
lists them (when present), and each template rendered into a sample pod against the
Kubernetes Pod schema. Exits 1 and names the file and the field of every problem.
`;

export const certsUsage = `Usage: sidecar-injector certs [options]

  --out DIR          where to write the overlay (default manifests/overlays/self-signed)
  --base DIR         the kustomize base it builds on (default manifests/base)
  --service NAME     the webhook Service (default sidecar-injector)
  --namespace NS     its namespace (default sidecar-injector)
  --days N           serving certificate lifetime in days (default 90)
  --ca-days N        CA lifetime in days, when a new CA is made (default 3650)

Writes DIR/ca.crt, DIR/ca.key, DIR/tls.crt, DIR/tls.key and DIR/kustomization.yaml.
Keep ca.key secret; it is reused on the next run unless it expires within 30 days.
`;
