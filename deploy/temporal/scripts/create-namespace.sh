#!/bin/sh
# Registers the namespace the worker uses, once.
set -eu
ns=${DEFAULT_NAMESPACE:-default}
if temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1; then
	echo "namespace $ns exists"
else
	temporal operator namespace create --namespace "$ns" --retention 72h
fi
