// Package ociimage builds Falcon's container image without a Docker daemon
// or a base image to pull: `make image` (hack/image) and the tests call it.
//
// The image is FROM scratch, made with go-containerregistry, and holds two
// layers: a base (/etc/passwd and /etc/group naming the non-root user
// falcon, uid and gid 65532 as in distroless's nonroot; the build host's CA
// bundle at /etc/ssl/certs/ca-certificates.crt, which the Google APIs and
// Cloudflare's key endpoint need; /tmp with mode 1777; /home/falcon), then
// the static binary at /falcon. The base layer changes only with the CA
// bundle, so a registry keeps one copy of it across versions. The
// entrypoint is /falcon, the user 65532:65532, and the OCI labels carry the
// version, the commit and the source repository.
//
// Every timestamp (files, history, config) is the commit's time or
// SOURCE_DATE_EPOCH and the layers are gzipped by this package at a fixed
// level, so building the same commit with the same Go toolchain and CA
// bundle gives the same bytes and the same digest.
//
// The output is one tar file holding an OCI image layout (oci-layout,
// index.json, blobs/sha256/...) plus a Docker-style manifest.json naming the
// same config and layer blobs, the shape `docker save` has written since
// Docker 25. The layout side is the image as built, digest and all: skopeo
// reads it as oci-archive: (checked with skopeo 1.9, which keeps the
// digest; podman load shares its library), and crane reads the unpacked
// directory. The manifest.json side is what go-containerregistry's tarball
// package reads (crane push of the file), what skopeo's docker-archive:
// reads and what older Docker loads; these wrap the same config and layers
// in a Docker manifest of their own, so the pushed manifest digest differs.
// Writing only pkg/v1/tarball (Docker format) would leave out the OCI
// readers, and only pkg/v1/layout would give a directory, which `crane push
// FILE` and `docker load` do not take.
package ociimage
