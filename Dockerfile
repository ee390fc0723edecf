# One image for every component; the Deployments choose the subcommand
# (manager, gateway, webui) by their args.
FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sftpgate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/sftpgate /sftpgate
USER 65532:65532
ENTRYPOINT ["/sftpgate"]
