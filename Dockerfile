# The operator image: a static binary on a distroless base, running as non-root.
#   docker build -t ghcr.io/sandgate-dev/sandgate:dev .
# The builder is pinned by digest: golang:1.26 (Go 1.26.5), the multi-platform image index
# docker-library/repo-info records for that tag (repos/golang/remote/1.26.md). Bump tag and
# digest together.
FROM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY certs/ certs/
COPY cmd/ cmd/
COPY internal/ internal/
COPY reconcilers/ reconcilers/
COPY webhooks/ webhooks/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# What --version prints and agent_sandbox_build_info carries (internal/version).
ARG VERSION=unknown
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=unknown
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w \
      -X github.com/sandgate-dev/sandgate/internal/version.gitVersion=${VERSION} \
      -X github.com/sandgate-dev/sandgate/internal/version.gitCommit=${GIT_COMMIT} \
      -X github.com/sandgate-dev/sandgate/internal/version.buildDate=${BUILD_DATE}" \
    -o /out/sandgate ./cmd/sandgate

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/sandgate /sandgate
USER 65532:65532
ENTRYPOINT ["/sandgate"]
