# syntax=docker/dockerfile:1
# Build: docker build -t loadout .
# Run:   docker run --rm -it -e OPENAI_API_KEY -v loadout-data:/data loadout chat
#        docker run -d -e OPENAI_API_KEY -e TELEGRAM_BOT_TOKEN \
#          -e LOADOUT_TELEGRAM_ENABLED=true -e LOADOUT_TELEGRAM_ALLOWED_USERS=<your id> \
#          -v loadout-data:/data -p 8080:8080 loadout

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The SQLite driver needs cgo; the result links only against glibc. The
# caches keep the compiled driver between builds, so a code change does
# not compile SQLite again.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -tags sqlite_fts5,goolm -trimpath -ldflags="-s -w" -o /out/loadout ./cmd/loadout && \
    mkdir -p /out/data

# The variant with chromium, for the browser group (docs/tools.md):
#   docker build --target browser -t loadout:browser .
#   docker run -d -e OPENAI_API_KEY -e LOADOUT_BROWSER_ENABLED=true ... loadout:browser
# It runs as the same uid 65532 on Debian, which chromium needs.
FROM debian:bookworm-slim AS browser
RUN apt-get update && apt-get install -y --no-install-recommends chromium ca-certificates fonts-liberation && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /out/loadout /usr/local/bin/loadout
COPY docker/config.yaml /etc/loadout/config.yaml
COPY --from=build --chown=65532:65532 /out/data /data
ENV LOADOUT_CONFIG=/etc/loadout/config.yaml
VOLUME ["/data"]
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/loadout", "health"]
ENTRYPOINT ["/usr/local/bin/loadout"]
CMD ["serve"]

# The default image (the last stage): distroless, without chromium.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/loadout /usr/local/bin/loadout
COPY docker/config.yaml /etc/loadout/config.yaml
# nonroot is uid/gid 65532: a bind-mounted /data must be writable by it.
COPY --from=build --chown=65532:65532 /out/data /data
ENV LOADOUT_CONFIG=/etc/loadout/config.yaml
VOLUME ["/data"]
USER 65532:65532
EXPOSE 8080
# distroless has no shell or curl: the binary checks its own /healthz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/loadout", "health"]
ENTRYPOINT ["/usr/local/bin/loadout"]
CMD ["serve"]
