# sidecar-terminator: one image for both roles. The args choose the role:
#   docker run IMAGE agent --node-name ...      (DaemonSet)
#   docker run IMAGE controller ...             (Deployment)
# Build: docker build -t REGISTRY/sidecar-terminator:TAG .
# The quick-exit image for virtual nodes is images/quick-exit/Dockerfile.
# Without a registry or Docker, e2e/images/build-project-image.sh builds the same contents offline
# as an OCI archive (docs/images.md).

# ---- build: bundle the TypeScript (scripts/build.ts), then keep only the production dependencies ----
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# No install scripts: the `node` devDependency would download a second Node (this image has one),
# and the optional native addons of ssh2 (Docker over SSH, unused) fall back to JavaScript.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY main.ts ./
COPY scripts/build.ts ./scripts/build.ts
COPY agent ./agent
COPY common ./common
COPY crr ./crr
RUN npm run build && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# ---- runtime: Node 24 and nothing else (no shell, no package manager) ----
FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# Loaded at run time by the agent's runtime clients (from dist/main.js: ../proto).
COPY proto ./proto
# distroless' "nonroot". The agent's DaemonSet overrides it with uid 0 (without any capability)
# to reach the root-owned runtime sockets: docs/deploy.md.
USER 65532:65532
# Writes nothing: runs with readOnlyRootFilesystem (the manifests mount an emptyDir at /tmp).
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/main.js"]
