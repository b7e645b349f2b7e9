#!/bin/sh
# Waits for the Temporal server, then registers the namespace the worker
# uses and Tollgate's search attributes. Safe to run on every
# `docker compose up`: what exists is kept. Each step is retried, since a
# server that has just answered its health check can still refuse a
# namespace it has not loaded yet; compose also restarts the service on
# failure.
#
# docker-compose.yml runs it in the admin-tools image; `make test-cluster`
# runs the same file with the temporal CLI it built.
set -eu
ns=${DEFAULT_NAMESPACE:-default}
: "${TEMPORAL_ADDRESS:=temporal:7233}"
export TEMPORAL_ADDRESS
# How many times each step is tried, two seconds apart.
tries=${TEMPORAL_WAIT_TRIES:-90}

# retry runs a command until it succeeds, showing its last error.
retry() {
	n=1
	while ! out=$("$@" 2>&1); do
		if [ "$n" -ge "$tries" ]; then
			printf '%s\n' "$out" >&2
			echo "create-namespace: gave up after $tries tries: $*" >&2
			return 1
		fi
		n=$((n + 1))
		sleep 2
	done
	[ -z "$out" ] || printf '%s\n' "$out"
}

echo "waiting for the Temporal server at $TEMPORAL_ADDRESS"
retry temporal operator cluster health >/dev/null
echo "server is healthy"

ensure_namespace() {
	if temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1; then
		echo "namespace $ns exists"
	else
		temporal operator namespace create --namespace "$ns" --retention 72h
	fi
}
retry ensure_namespace

# The names and types are the contract in workflows/search.go.
ensure_search_attributes() {
	existing=$(temporal operator search-attribute list --namespace "$ns") || return 1
	for attr in TollgateStatus:Keyword TollgateWaitingCalls:KeywordList TollgateWaitingTools:KeywordList TollgateUser:Keyword TollgateSession:Keyword TollgateParent:Keyword; do
		name=${attr%%:*} type=${attr#*:}
		if printf '%s\n' "$existing" | grep -qw "$name"; then
			echo "search attribute $name exists"
		else
			temporal operator search-attribute create --namespace "$ns" --name "$name" --type "$type" || return 1
		fi
	done
}
retry ensure_search_attributes
echo "namespace $ns and Tollgate's search attributes are registered"
