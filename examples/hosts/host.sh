#!/bin/sh
# One host of several (docs/operations.md, "Many hosts"): gunicorn on ADDRESS (PORT, 5000 by
# default) with the instance folder FOLDER of its own, serving the PostgreSQL database and
# counting in the Redis that every host shares. WEB_CONCURRENCY sets its workers.
#
#   DATABASE_URL=postgresql://... RATELIMIT_STORAGE_URI=redis://... \
#       examples/hosts/host.sh ADDRESS FOLDER
#
# gunicorn replaces this script (same process id, written in FOLDER/gunicorn.pid): SIGHUP to
# it reloads the host gracefully, SIGTERM stops it.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: examples/hosts/host.sh ADDRESS FOLDER" >&2
    exit 2
fi
: "${DATABASE_URL:?every host names the one PostgreSQL database: DATABASE_URL=postgresql://...}"
case "${RATELIMIT_STORAGE_URI:-}" in
    redis://* | rediss://*) ;;
    *)
        echo "every host counts its limits in one Redis: RATELIMIT_STORAGE_URI=redis://..." >&2
        exit 2
        ;;
esac
mkdir -p "$2"
export HOST="$1" INSTANCE_PATH="$(cd "$2" && pwd)"  # absolute: the next line changes folder
# The load balancer's address (here, this machine): only its X-Forwarded-For is believed.
export TRUSTED_PROXIES="${TRUSTED_PROXIES:-127.0.0.1}"
cd "$(dirname "$0")/../.."  # the project's folder: gunicorn.conf.py and .venv
exec .venv/bin/python -OO -m gunicorn --pid "$INSTANCE_PATH/gunicorn.pid" wsgi:app
