#!/bin/sh
# Creates the Temporal databases and brings their schemas up to date. Safe
# to run on every `docker compose up`: existing databases are kept and only
# migrated forward.
set -eu
: "${POSTGRES_HOST:=postgresql}" "${POSTGRES_PORT:=5432}" "${POSTGRES_USER:=temporal}"
tool() { temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_HOST" -p "$POSTGRES_PORT" -u "$POSTGRES_USER" "$@"; }

setup() {
	db=$1 dir=$2
	tool --db "$db" create 2>/dev/null || echo "database $db already exists"
	if ! tool --db "$db" update-schema -d "$dir" 2>/dev/null; then
		# A new database has no schema_version table yet.
		tool --db "$db" setup-schema -v 0.0
		tool --db "$db" update-schema -d "$dir"
	fi
}
setup temporal /etc/temporal/schema/postgresql/v12/temporal/versioned
setup temporal_visibility /etc/temporal/schema/postgresql/v12/visibility/versioned
echo "PostgreSQL schema is up to date"
