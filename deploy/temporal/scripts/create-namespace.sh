#!/bin/sh
# Registers the namespace the worker uses and Tollgate's search attributes,
# once; safe to run on every `docker compose up`.
set -eu
ns=${DEFAULT_NAMESPACE:-default}
if temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1; then
	echo "namespace $ns exists"
else
	temporal operator namespace create --namespace "$ns" --retention 72h
fi
# The names and types are the contract in workflows/search.go.
existing=$(temporal operator search-attribute list --namespace "$ns")
for attr in TollgateStatus:Keyword TollgateWaitingCalls:KeywordList TollgateWaitingTools:KeywordList TollgateUser:Keyword TollgateSession:Keyword; do
	name=${attr%%:*} type=${attr#*:}
	if printf '%s\n' "$existing" | grep -qw "$name"; then
		echo "search attribute $name exists"
	else
		temporal operator search-attribute create --namespace "$ns" --name "$name" --type "$type"
	fi
done
