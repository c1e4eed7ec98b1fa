#!/usr/bin/env bash
# Starts MariaDB if it is not answering, and waits until it does. The store
# tests run against it and, under CI=true, fail rather than skip without it.
set -euo pipefail
up() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1 || mysqladmin --protocol=tcp -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1; }
if ! up; then
  echo "starting MariaDB" >&2
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  for _ in $(seq 1 60); do up && break; sleep 1; done
fi
up || { echo "MariaDB did not come up on 127.0.0.1:3306" >&2; exit 1; }
echo "MariaDB is up" >&2
