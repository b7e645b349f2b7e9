#!/bin/sh
# Creates the Temporal databases and brings their schemas up to date, the
# way Temporal's admin-tools auto-setup does: create the database, set up
# the version tables (schema 0.0), then apply every versioned migration.
# Safe to run on every `docker compose up`: an existing database is kept
# and only migrated forward. Every error is shown; only "the database
# already exists" is expected and passed over.
#
# docker-compose.yml runs it in the admin-tools image; `make test-cluster`
# runs the same file against a local PostgreSQL, with SCHEMA_DIR pointing
# at the schema directory of the Temporal server module it built.
set -eu
: "${POSTGRES_HOST:=postgresql}" "${POSTGRES_PORT:=5432}" "${POSTGRES_USER:=temporal}"
: "${DB:=postgres12}" "${DBNAME:=temporal}" "${VISIBILITY_DBNAME:=temporal_visibility}"
# The admin-tools image keeps the schemas here.
: "${SCHEMA_DIR:=/etc/temporal/schema/postgresql/v12}"
# temporal-sql-tool reads the password from SQL_PASSWORD; POSTGRES_PWD is
# the server image's name for it.
if [ -z "${SQL_PASSWORD:-}" ] && [ -n "${POSTGRES_PWD:-}" ]; then
	SQL_PASSWORD=$POSTGRES_PWD
fi
export SQL_PASSWORD="${SQL_PASSWORD:-}"

tool() { temporal-sql-tool --plugin "$DB" --ep "$POSTGRES_HOST" -p "$POSTGRES_PORT" -u "$POSTGRES_USER" "$@"; }

setup() {
	db=$1 dir=$2
	if [ ! -d "$dir" ]; then
		echo "setup-postgres: no schema directory $dir (set SCHEMA_DIR)" >&2
		exit 1
	fi
	# The postgres plugin treats "already exists" as success; older tools
	# may not, so that one error is passed over by name.
	if out=$(tool --db "$db" create 2>&1); then
		echo "database $db is there"
	elif printf '%s' "$out" | grep -q 'already exists'; then
		echo "database $db already exists"
	else
		printf '%s\n' "$out" >&2
		echo "setup-postgres: cannot create database $db on $POSTGRES_HOST:$POSTGRES_PORT" >&2
		exit 1
	fi
	# Creates the version tables; a database past 0.0 is left as it is.
	tool --db "$db" setup-schema -v 0.0
	tool --db "$db" update-schema -d "$dir"
}

setup "$DBNAME" "$SCHEMA_DIR/temporal/versioned"
setup "$VISIBILITY_DBNAME" "$SCHEMA_DIR/visibility/versioned"
echo "PostgreSQL schema is up to date"
