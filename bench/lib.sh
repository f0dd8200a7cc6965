# What the benchmarks share. Source it after setting $bin (the autoperf
# binary) and $work (a scratch directory): it kills what start() started
# when the script exits.

# start() runs in a command substitution (a subshell): its pids go to a
# file, not a variable, or the servers outlive the script.
cleanup() { [ -f "$work/pids" ] && xargs -r kill <"$work/pids" 2>/dev/null || true; }
trap cleanup EXIT

# `$bin ARGS…`, a process that prints its URL on its first line, logging
# to $1; returns the URL.
start() {
    local log=$1; shift
    "$bin" "$@" >"$log" 2>&1 &
    echo $! >>"$work/pids"
    for _ in $(seq 100); do
        if url=$(grep -o 'http://[0-9.:]*' "$log" | head -1) && [ -n "$url" ]; then
            echo "$url"; return
        fi
        sleep 0.1
    done
    echo "no URL from $*: $(cat "$log")" >&2; exit 1
}
