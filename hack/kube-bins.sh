#!/usr/bin/env bash
# Builds the control-plane binaries that internal/testenv/kubeenv runs (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and prints the
# directory that holds them.
#
# Versions are pinned by hack/kubebins/go.mod (Kubernetes, etcd and every
# dependency, checked by go.sum) and by KWOK_VERSION below. The cache key is a
# hash of those pins, the Go toolchain and the build flags, so changing any of
# them builds into a new directory:
#
#   ${FALCON_CACHE:-$HOME/.cache/falcon}/kube/<k8s version>-<hash>/bin
#
# A cache hit costs one `go env`. A build is long: 38 minutes measured on a
# busy 2-core machine with a cold Go build cache (30 CPU-minutes), 30 seconds
# when Go's build cache already holds the packages. It happens in a temporary
# directory that is renamed into place only when every binary is there, so an
# interrupted build never leaves a half cache, and concurrent callers wait on
# a lock instead of building twice.
set -euo pipefail

KWOK_VERSION=v0.8.0
BINS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

root=$(cd "$(dirname "$0")/.." && pwd)
mod=$root/hack/kubebins

k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$mod/go.mod")
[[ -n $k8s_version ]] || { echo "kube-bins: no k8s.io/kubernetes in $mod/go.mod" >&2; exit 1; }
minor=${k8s_version#v*.}
minor=${minor%%.*}
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
export CGO_ENABLED=0 GOWORK=off

toolchain=$(go env GOVERSION GOOS GOARCH | paste -sd' ' -)
hash=$(
  {
    cat "$mod/go.mod" "$mod/go.sum" "$mod/etcd/main.go"
    echo "kwok=$KWOK_VERSION toolchain=$toolchain cgo=$CGO_ENABLED ldflags=$ldflags"
  } | sha256sum | cut -c1-12
)
key=$k8s_version-$hash
base=${FALCON_CACHE:-$HOME/.cache/falcon}/kube
dir=$base/$key

complete() {
  local b
  for b in "${BINS[@]}"; do [[ -x $1/bin/$b ]] || return 1; done
}

if complete "$dir"; then
  echo "$dir/bin"
  exit 0
fi

mkdir -p "$base"
exec 9>"$base/$key.lock"
flock 9
if complete "$dir"; then # another caller built it while we waited
  echo "$dir/bin"
  exit 0
fi

rm -rf "$base/.build-$key".* # left by a build that was killed: we hold the lock
tmp=$(mktemp -d "$base/.build-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
echo "kube-bins: building Kubernetes $k8s_version, etcd and kwok $KWOK_VERSION into $dir (takes minutes)" >&2

(
  cd "$mod"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" \
    ./etcd \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
)
GOBIN=$tmp/bin go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"

complete "$tmp" || { echo "kube-bins: build finished without every binary in $tmp/bin" >&2; exit 1; }
chmod 755 "$tmp"
rm -rf "$dir" # only ever an incomplete leftover: complete dirs returned above
mv -T "$tmp" "$dir"
trap - EXIT
echo "kube-bins: built $dir/bin in $((SECONDS - start))s" >&2
echo "$dir/bin"
