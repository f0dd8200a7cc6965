# Sourced by the benchmarks: installs nginx (and wrk, with NEED_WRK=1) from
# apt when missing, builds autoperf in release mode unless AUTOPERF names a
# binary, and starts nginx on a free 127.0.0.1 port serving a 100-byte and a
# 4 KiB file from a fresh temp dir. nginx is stopped, and the dir removed
# (unless KEEP is set), when the script exits.
#
# In:  NGINX_WORKERS (2), NGINX_CONNECTIONS (4096), NGINX_NOFILE (unset),
#      NGINX_LISTEN (extra `listen` options), NGINX_PIN (a CPU list for taskset),
#      NGINX_TLS (set: HTTPS with a self-signed certificate made by openssl
#      for 127.0.0.1; add `ssl` to NGINX_LISTEN yourself)
# Out: WORK, PORT, AUTOPERF, NGINX_PID, CERT (with NGINX_TLS: the PEM to trust)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

need=()
command -v nginx >/dev/null || need+=(nginx)
[[ -n "${NEED_WRK:-}" ]] && ! command -v wrk >/dev/null && need+=(wrk)
if ((${#need[@]})); then
    echo "installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [[ -z "${AUTOPERF:-}" ]]; then
    (cd "$ROOT" && cargo build --release --quiet --bin autoperf)
    AUTOPERF="${CARGO_TARGET_DIR:-$ROOT/target}/release/autoperf"
fi

WORK=$(mktemp -d /tmp/autoperf-bench.XXXXXX)
chmod 755 "$WORK" # nginx workers run as nobody and must read the files
mkdir -p "$WORK/www" "$WORK/logs" "$WORK/temp"
head -c 100 /dev/zero | tr '\0' a >"$WORK/www/100b.txt"
head -c 4096 /dev/zero | tr '\0' b >"$WORK/www/4k.txt"
chmod 644 "$WORK/www/"*

TLS_CONF=""
if [[ -n "${NGINX_TLS:-}" ]]; then
    CERT="$WORK/cert.pem"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$WORK/key.pem" -out "$CERT" 2>/dev/null
    TLS_CONF="ssl_certificate $CERT; ssl_certificate_key $WORK/key.pem; ssl_session_cache shared:SSL:10m;"
fi

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/nginx.conf" <<CONF
worker_processes ${NGINX_WORKERS:-2};
${NGINX_NOFILE:+worker_rlimit_nofile $NGINX_NOFILE;}
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log warn;
events { worker_connections ${NGINX_CONNECTIONS:-4096}; }
http {
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 600s;
    client_body_temp_path $WORK/temp/body;
    proxy_temp_path $WORK/temp/proxy;
    fastcgi_temp_path $WORK/temp/fastcgi;
    uwsgi_temp_path $WORK/temp/uwsgi;
    scgi_temp_path $WORK/temp/scgi;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:$PORT ${NGINX_LISTEN:-};
        root $WORK/www;
        $TLS_CONF
    }
}
CONF
if [[ -n "${NGINX_PIN:-}" ]]; then
    taskset -c "$NGINX_PIN" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
else
    "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
fi
NGINX_PID=$!
stop_nginx() {
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    if [[ -n "${KEEP:-}" ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap stop_nginx EXIT
for _ in $(seq 50); do
    if [[ -n "${NGINX_TLS:-}" ]]; then
        curl -sfk "https://127.0.0.1:$PORT/100b.txt" >/dev/null 2>&1 && break
    elif [[ "${NGINX_LISTEN:-}" == *http2* ]]; then
        curl -sf --http2-prior-knowledge "http://127.0.0.1:$PORT/100b.txt" >/dev/null 2>&1 && break
    else
        curl -sf "http://127.0.0.1:$PORT/100b.txt" >/dev/null 2>&1 && break
    fi
    sleep 0.1
done
