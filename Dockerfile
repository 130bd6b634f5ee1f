# sidecar-terminator: one image for both roles. The args choose the role:
#   docker run IMAGE agent --node-name ...      (DaemonSet)
#   docker run IMAGE controller ...             (Deployment)
# Build and push for linux/amd64 and linux/arm64 in one command (docs/images.md):
#   IMAGE=REGISTRY/sidecar-terminator TAG=0.1.0 npm run image
# or for this machine only: docker build -t REGISTRY/sidecar-terminator:TAG . (BuildKit, Docker's
# default builder since 23.0). The quick-exit image for virtual nodes is images/quick-exit/Dockerfile.
# Where no registry is reachable, e2e/images/build-dockerfile.sh builds this file with docker build on
# bases assembled locally (CI and npm run release do); without Docker,
# e2e/images/build-project-image.sh builds the same contents offline as an OCI archive.

# ---- build: bundle the TypeScript (scripts/build.ts), then gather the packages the bundle imports ----
# On the build machine's own platform whatever the target: the bundle is JavaScript and the packages
# gathered are JavaScript only (scripts/runtime-modules.ts fails otherwise), so one build serves every
# platform and nothing runs under emulation.
FROM --platform=$BUILDPLATFORM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# No install scripts: the `node` devDependency would download a second Node (this image has one),
# and the optional native addons of ssh2 (Docker over SSH, unused) fall back to JavaScript.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY main.ts ./
COPY scripts/build.ts scripts/runtime-modules.ts ./scripts/
COPY api ./api
COPY rules ./rules
COPY agent ./agent
COPY common ./common
COPY crr ./crr
# dist/main.js (minified) and dist/main.js.map; /out/node_modules: only the packages the bundle
# leaves external (dockerode) and what they need at run time, without TypeScript files and maps.
# The commit build_info and --version report: docker build --build-arg SOURCE_COMMIT=$(git rev-parse HEAD)
# (the context has no .git).
ARG SOURCE_COMMIT=
RUN npm run build -- dist /tmp/meta.json && node scripts/runtime-modules.ts /tmp/meta.json . /out

# ---- runtime: Node 24 and nothing else (no shell, no package manager) ----
FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /out/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# Loaded at run time by the agent's runtime clients (from dist/main.js: ../proto).
COPY proto ./proto
# distroless' "nonroot". The agent's DaemonSet overrides it with uid 0 (without any capability)
# to reach the root-owned runtime sockets: docs/deploy.md.
USER 65532:65532
# Writes nothing: runs with readOnlyRootFilesystem (the manifests mount an emptyDir at /tmp).
# --enable-source-maps: stack traces name the TypeScript sources (dist/main.js.map).
ENTRYPOINT ["/nodejs/bin/node", "--enable-source-maps", "/app/dist/main.js"]
