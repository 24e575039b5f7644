#!/bin/sh
# Builds presence-postgres:dev, a FROM-scratch PostgreSQL image, from the
# server Debian's postgresql package installed on this host (`make tools`
# installs it), so that deploy/compose.yaml needs no registry. It copies
# the server binaries, the libraries ldd names for them (at their paths),
# the share/ files and time zones, a passwd/group with a postgres user,
# dash as /bin/sh (initdb runs the server through popen) and
# entrypoint.sh. The staging tree is made anew each time but keeps the
# host's modes and times, so Docker's cache makes a re-run a no-op.
#   sh deploy/postgres/build.sh [tag]      (make docker-postgres)
set -eu
tag=${1:-presence-postgres:dev}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] && [ -x "$bin/postgres" ] || {
  echo "no PostgreSQL server under /usr/lib/postgresql: make tools installs Debian's postgresql" >&2
  exit 1
}
pg=$(dirname "$bin")
ver=$(basename "$pg")
share=/usr/share/postgresql/$ver
# a staging tree of its own (two builds at once do not mix), removed after
ctx=$(mktemp -d "${TMPDIR:-/tmp}/presence-postgres.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs"
fs=$ctx/rootfs

# put PATH... copies files (following links) to the same paths under $fs
put() {
  for f in "$@"; do
    mkdir -p "$fs$(dirname "$f")"
    cp -pL "$f" "$fs$f"
  done
}
put "$bin/postgres" "$bin/initdb" "$bin/pg_ctl" "$bin/pg_isready" /bin/sh
# `locale -a` and C.UTF-8: initdb imports the system's collations through
# them (and warns when there are none)
if [ -x /usr/bin/locale ] && [ -d /usr/lib/locale/C.utf8 ]; then
  put /usr/bin/locale
  mkdir -p "$fs/usr/lib/locale"
  cp -pR /usr/lib/locale/C.utf8 "$fs/usr/lib/locale/"
fi
# modules the server loads at initdb and run time (plpgsql, snowball
# dictionaries, encoding conversions); not the JIT, which would pull in
# LLVM (jit stays off)
for f in "$pg"/lib/*.so; do
  case $f in */llvmjit.so) ;; *) put "$f" ;; esac
done
mkdir -p "$fs$share" "$fs/usr/share/zoneinfo"
cp -pR "$share/." "$fs$share/"
cp -pR /usr/share/zoneinfo/. "$fs/usr/share/zoneinfo/"
# every shared library ldd names (the dynamic loader included), once
libs=$(find "$fs" -type f \( -perm -u+x -o -name '*.so' \) | sed "s|^$fs||" |
  while read -r f; do ldd "$f" 2>/dev/null || true; done |
  grep -o '/[^ ]*\.so[^ ]*' | sort -u)
for l in $libs; do
  [ -e "$fs$l" ] || put "$l"
done
cp -p "$here/entrypoint.sh" "$fs/entrypoint.sh"
chmod 0755 "$fs/entrypoint.sh"
mkdir -p "$fs/etc"
printf 'root:x:0:0:root:/:/nonexistent\npostgres:x:70:70:PostgreSQL:/var/lib/postgresql:/nonexistent\n' >"$fs/etc/passwd"
printf 'root:x:0:\npostgres:x:70:\n' >"$fs/etc/group"
touch -d @0 "$fs/etc/passwd" "$fs/etc/group"
# the data directory (mode 0700, as the server wants) and /tmp (its
# socket), given to postgres by the Dockerfile
mkdir -p "$ctx/data" "$ctx/tmp"
chmod 0700 "$ctx/data" "$ctx/tmp"
touch -d @0 "$ctx/data" "$ctx/tmp"
sed "s|@BIN@|$bin|g" "$here/Dockerfile" >"$ctx/Dockerfile"
# quiet unless it fails (the legacy builder's notice included)
out=$(docker build -q -t "$tag" "$ctx" 2>&1) || { echo "$out" >&2; exit 1; }
echo "$tag: PostgreSQL $ver from $bin"
