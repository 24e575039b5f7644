#!/bin/sh
# Installs Centrifugo, the peer `make bench` compares presence with, into
# BIN (default bin/) through the Go module proxy, pinned, only when
# BIN/centrifugo is missing or another version (idempotent). It is built
# with `go install`, so it never becomes a dependency of this module.
set -eu
version=v6.9.1
bin=${BIN:-bin}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
# A `go install` build says v0.0.0 in `centrifugo version` (the release
# sets it at link time): its module version comes from `go version -m`.
installed() {
  [ -x "$bin/centrifugo" ] && go version -m "$bin/centrifugo" 2>/dev/null |
    grep -q "mod[[:space:]]*github.com/centrifugal/centrifugo/v6[[:space:]]*$version[[:space:]]"
}
installed && exit 0
echo "installing centrifugo $version into $bin (a few minutes on a small machine)"
cd /tmp
GOBIN="$bin" GOFLAGS= go install "github.com/centrifugal/centrifugo/v6@$version"
installed || { echo "centrifugo: $bin/centrifugo is not $version after go install" >&2; exit 1; }
