# The Tollgate worker, for docker compose and other multi-machine setups.
# Build stage: a full Go toolchain. Final stage: only the static binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# modernc SQLite (used only by --dev) is pure Go, so the binary is static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/starter ./starter \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/healthcheck ./cmd/healthcheck \
 && mkdir -p /out/data /out/workspace

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/starter /out/gateway /out/healthcheck /usr/local/bin/
# Named volumes take the ownership of these directories, so the nonroot
# user can write its stores. docker-compose.yml runs the worker as the
# owner of the bind-mounted workspace instead, and its tollgate-init
# service hands both directories to that user.
COPY --from=build --chown=nonroot:nonroot /out/data /data
COPY --from=build --chown=nonroot:nonroot /out/workspace /workspace
WORKDIR /home/nonroot
ENV TOLLGATE_DATA=/data TOLLGATE_WORKSPACE=/workspace
VOLUME ["/data", "/workspace"]
ENTRYPOINT ["/usr/local/bin/worker"]
