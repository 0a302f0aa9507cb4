# syntax=docker/dockerfile:1
# Build: docker build -t loadout .
# Run:   docker run --rm -it -e OPENAI_API_KEY -v loadout-data:/data loadout chat

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The SQLite driver needs cgo; the result links only against glibc.
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/loadout ./cmd/loadout
# The sample config, with the store on the volume and the HTTP server
# reachable from outside the container.
RUN mkdir -p /out/data && \
    sed -e 's|^  path: data/loadout.db|  path: /data/loadout.db|' \
        -e 's|^  listen: 127.0.0.1:8080|  listen: 0.0.0.0:8080|' config.yaml > /out/config.yaml && \
    grep -q '/data/loadout.db' /out/config.yaml && grep -q '0.0.0.0:8080' /out/config.yaml

FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/loadout /usr/local/bin/loadout
COPY --from=build /out/config.yaml /etc/loadout/config.yaml
COPY --from=build --chown=nonroot:nonroot /out/data /data
ENV LOADOUT_CONFIG=/etc/loadout/config.yaml
# The SQLite file lives on this volume; mount it to keep sessions.
VOLUME ["/data"]
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/loadout"]
CMD ["serve"]
