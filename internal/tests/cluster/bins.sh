#!/bin/sh
# Builds, once, the programs `make test-cluster` runs, into
# $TOLLGATE_CLUSTER_BIN (default ~/.cache/tollgate-cluster/bin):
#
#   temporal-server, temporal-sql-tool  the Temporal server and its schema
#                                       tool, at the go.temporal.io/server
#                                       version in go.mod
#   temporal                            the Temporal CLI (the compose
#                                       scripts call it)
#   weed                                SeaweedFS, the S3-compatible store
#   nats-server                         NATS with JetStream, for live
#                                       events, at the
#                                       github.com/nats-io/nats-server/v2
#                                       version in go.mod
#
# Each is built from its Go module, into a directory named for its
# version, and linked by its plain name; a version already built is kept.
# None of them is added to Tollgate's go.mod.
set -eu
cd "$(dirname "$0")/../../.."
GO=${GO:-go}
cache=${XDG_CACHE_HOME:-$HOME/.cache}
bin=${TOLLGATE_CLUSTER_BIN:-$cache/tollgate-cluster/bin}
server_version=$($GO list -m -f '{{.Version}}' go.temporal.io/server)
cli_version=v1.5.1
weed_module=github.com/seaweedfs/seaweedfs
weed_version=v0.0.0-20261109003541-7506e5f91cd6
nats_module=github.com/nats-io/nats-server/v2
nats_version=$($GO list -m -f '{{.Version}}' $nats_module)
mkdir -p "$bin"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# built NAME DIR: is DIR/NAME there? If so, link it.
built() {
	if [ -x "$2/$1" ]; then
		ln -sfn "$2/$1" "$bin/$1"
		return 0
	fi
	return 1
}

timed() {
	what=$1
	shift
	start=$(date +%s)
	echo "building $what (once; later runs reuse it)"
	"$@"
	echo "built $what in $(($(date +%s) - start))s"
}

# The server's commands need modules Tollgate does not (urfave/cli), so
# they are built in a scratch module that requires what go.mod requires:
# the same server version and the same dependency versions.
build_server() {
	mkdir -p "$scratch/server"
	cp go.mod go.sum "$scratch/server/"
	(cd "$scratch/server" &&
		sed -i 's#^module .*#module tollgate.local/clusterbins#' go.mod &&
		GOFLAGS=-mod=mod $GO build -o "$1/" go.temporal.io/server/cmd/server go.temporal.io/server/cmd/tools/sql)
	mv "$1/server" "$1/temporal-server"
	mv "$1/sql" "$1/temporal-sql-tool"
}
dir=$bin/temporal-$server_version
if ! built temporal-server "$dir" || ! built temporal-sql-tool "$dir"; then
	mkdir -p "$dir"
	timed "temporal-server and temporal-sql-tool $server_version" build_server "$dir"
	built temporal-server "$dir"
	built temporal-sql-tool "$dir"
fi

dir=$bin/cli-$cli_version
if ! built temporal "$dir"; then
	mkdir -p "$dir"
	timed "the temporal CLI $cli_version" env GOBIN="$dir" GOFLAGS=-mod=mod $GO install "github.com/temporalio/cli/cmd/temporal@$cli_version"
	built temporal "$dir"
fi

# SeaweedFS's go.mod has replace directives, so `go install pkg@version`
# refuses it; it is built inside its own module, downloaded to the
# module cache.
build_weed() {
	src=$(cd "$scratch" && GOFLAGS=-mod=mod $GO mod download -json "$weed_module@$weed_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$src" ]; then
		echo "bins.sh: cannot download $weed_module@$weed_version" >&2
		return 1
	fi
	(cd "$src" && GOFLAGS=-mod=mod $GO build -o "$1/weed" ./weed)
}
dir=$bin/weed-$weed_version
if ! built weed "$dir"; then
	mkdir -p "$dir"
	timed "SeaweedFS $weed_version" build_weed "$dir"
	built weed "$dir"
fi
# go.mod requires nats-server (the embedded dev server is its library),
# so it builds here with go.mod's dependency versions.
dir=$bin/nats-$nats_version
if ! built nats-server "$dir"; then
	mkdir -p "$dir"
	timed "nats-server $nats_version" $GO build -o "$dir/" "$nats_module"
	built nats-server "$dir"
fi
echo "cluster test programs are in $bin"
