# The operator image for users with Docker. devloop's own builds assemble the
# same binary into an image with go-containerregistry (no Docker daemon).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager
# The live update supervisor, for every platform the operator builds
# live-updatable images for (build.SupervisorDir).
RUN for arch in amd64 arm64; do \
      CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" -o /out/supervisors/supervisor-linux-$arch ./cmd/supervisor; \
    done

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/supervisors/ /supervisors/
USER 65532:65532
ENTRYPOINT ["/manager"]
