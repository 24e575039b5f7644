#!/bin/sh
# Regenerates messages/*.pb.go into the directory $1 (default messages/).
# protoc comes from Debian's protobuf-compiler; protoc-gen-go is built from
# the version of google.golang.org/protobuf that go.mod pins.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/messages}
if ! command -v protoc >/dev/null 2>&1; then
  echo "protoc missing: installing Debian's protobuf-compiler" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq protobuf-compiler >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq protobuf-compiler >/dev/null; }
  else
    echo "run as root or install protobuf-compiler" >&2; exit 1
  fi
fi
mkdir -p "$root/bin"
(cd "$root" && go build -o bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go)
cd "$root/messages"
protoc --plugin=protoc-gen-go="$root/bin/protoc-gen-go" -I . \
  --go_out="$out" --go_opt=paths=source_relative *.proto
