#!/usr/bin/env bash
# Make a local PostgreSQL available for the store tests, idempotently:
#   install it from Debian packages if missing, start a cluster on 127.0.0.1:5432,
#   create the role and database toolwire/toolwire, wait until it answers.
# The only thing printed on stdout is the line to export, so CI can do
#   export "$(bash scripts/postgres.sh)"
# Everything else goes to stderr.
set -euo pipefail

PORT=5432
HOST=127.0.0.1
DB_USER=toolwire
DB_PASSWORD=toolwire
DB_NAME=toolwire
# Used only when the Debian cluster tools (pg_ctlcluster) are not there.
FALLBACK_DATA_DIR=/var/lib/postgresql/toolwire-data

log() { echo "postgres.sh: $*" >&2; }

# Root runs commands directly (CI and the dev machines are root); anyone else needs sudo.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

as_postgres() {
    # cd / so the postgres user is not left in a directory it cannot read.
    (cd / && as_root runuser -u postgres -- "$@")
}

pg_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$dir" ] && [ -x "$dir/postgres" ] && echo "$dir"
}

install_if_missing() {
    if pg_bindir >/dev/null; then
        return
    fi
    log "installing PostgreSQL from Debian packages"
    as_root apt-get update >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
}

ready() {
    "$(pg_bindir)/pg_isready" -q -h "$HOST" -p "$PORT"
}

start_debian_cluster() {
    # A Debian cluster already configured on our port (usually <version>/main)?
    local line version name status
    line=$(pg_lsclusters --no-header 2>/dev/null | awk -v port="$PORT" '$3 == port {print; exit}')
    if [ -z "$line" ]; then
        version=$(basename "$(dirname "$(pg_bindir)")")
        log "creating cluster $version/toolwire on port $PORT"
        as_root pg_createcluster --port "$PORT" "$version" toolwire >&2
        line=$(pg_lsclusters --no-header | awk -v port="$PORT" '$3 == port {print; exit}')
    fi
    read -r version name _ status _ <<<"$line"
    if [ "$status" != "online" ]; then
        log "starting cluster $version/$name"
        as_root pg_ctlcluster "$version" "$name" start >&2
    fi
}

start_plain_cluster() {
    local bindir
    bindir=$(pg_bindir)
    if [ ! -f "$FALLBACK_DATA_DIR/PG_VERSION" ]; then
        log "initdb in $FALLBACK_DATA_DIR"
        as_root mkdir -p "$FALLBACK_DATA_DIR"
        as_root chown postgres:postgres "$FALLBACK_DATA_DIR"
        as_postgres "$bindir/initdb" -D "$FALLBACK_DATA_DIR" -A scram-sha-256 --auth-local=peer -U postgres >&2
    fi
    if ! as_postgres "$bindir/pg_ctl" -D "$FALLBACK_DATA_DIR" status >/dev/null 2>&1; then
        log "starting postgres from $FALLBACK_DATA_DIR"
        as_postgres "$bindir/pg_ctl" -D "$FALLBACK_DATA_DIR" -l "$FALLBACK_DATA_DIR/server.log" \
            -o "-c listen_addresses=$HOST -c port=$PORT -c unix_socket_directories=/tmp" start >&2
    fi
}

wait_ready() {
    for _ in $(seq 1 60); do
        if ready; then return; fi
        sleep 0.5
    done
    log "PostgreSQL did not become ready on $HOST:$PORT"
    exit 1
}

psql_admin() {
    # Over the local socket as the postgres superuser (peer authentication).
    local socket_args=()
    if ! command -v pg_ctlcluster >/dev/null 2>&1; then socket_args=(-h /tmp); fi
    as_postgres "$(pg_bindir)/psql" "${socket_args[@]}" -p "$PORT" -v ON_ERROR_STOP=1 -qtA "$@"
}

create_role_and_db() {
    if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$DB_USER'")" != "1" ]; then
        log "creating role $DB_USER"
        psql_admin -c "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD'" >&2
    else
        # Reset the password so a role left over with another one still works.
        psql_admin -c "ALTER ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD'" >&2
    fi
    if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != "1" ]; then
        log "creating database $DB_NAME"
        psql_admin -c "CREATE DATABASE $DB_NAME OWNER $DB_USER" >&2
    fi
}

install_if_missing
if ready; then
    log "already running on $HOST:$PORT"
elif command -v pg_ctlcluster >/dev/null 2>&1; then
    start_debian_cluster
else
    start_plain_cluster
fi
wait_ready
create_role_and_db
# The password login over TCP is what the tests use: prove it works before handing the URL out.
PGPASSWORD=$DB_PASSWORD "$(pg_bindir)/psql" -h "$HOST" -p "$PORT" -U "$DB_USER" -d "$DB_NAME" -qtAc "SELECT 1" >/dev/null
log "ready"
echo "TOOLWIRE_TEST_POSTGRES_URL=postgresql+asyncpg://$DB_USER:$DB_PASSWORD@$HOST:$PORT/$DB_NAME"
