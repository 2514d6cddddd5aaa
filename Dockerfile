# The image: the root filesystem `make rootfs` assembles (scripts/image/rootfs.mjs) over
# scratch — the Node binary from the npm registry, only the shared libraries it loads (from
# Debian's packages), the compiled production sources, the production dependencies and the
# bundled templates. No shell, no package manager, no base image to pull. `make image` builds
# this file without a daemon (buildah); `make image BUILDER=docker` with Docker.
FROM scratch
COPY build/rootfs/ /
ENV NODE_ENV=production
WORKDIR /app
# A numeric user (the Deployment's runAsUser): runAsNonRoot can check it without a passwd lookup.
USER 1000:1000
EXPOSE 10250
# node itself is PID 1's command (exec form, no shell, no npm): SIGTERM reaches the server,
# which turns unready, finishes in-flight reviews and exits 0.
ENTRYPOINT ["/usr/bin/node", "/app/dist/src/cli/main.js"]
CMD ["serve", "--port=10250", "--templates=/app/templates"]
