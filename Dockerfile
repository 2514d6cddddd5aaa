# syntax=docker/dockerfile:1
# Build: all dependencies, compile TypeScript (the production sources only).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json

# Runtime: production dependencies and the built output only, as a non-root user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist/src ./dist/src
COPY templates ./templates
# The image's "node" user (uid 1000), matching runAsUser in manifests/base/deployment.yaml.
USER 1000:1000
EXPOSE 10250
# node itself is PID 1's command (exec form, no shell, no npm): SIGTERM reaches the server,
# which turns unready, finishes in-flight reviews and exits.
ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["serve", "--port=10250"]
