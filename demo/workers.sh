#!/usr/bin/env bash
# Steps on other machines, all on this one: a Temporal dev server, a shared remote, a
# developer's clone and two workers' clones, each with a BAR_HOME of its own, as three
# machines would have. Three tasks go to the workers' queue; their records come back to
# the developer, who reviews them and lands one on main. Nothing outside a temporary
# directory is touched, and every process started here is stopped on the way out
# (KEEP=1 keeps the directory, to look around).
set -euo pipefail

if ! command -v bar >/dev/null || ! python3 -c 'import temporalio' 2>/dev/null; then
    echo "demo/workers.sh needs bar with its workers extra on the PATH: make demo-workers" >&2
    exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/bar-workers.XXXXXX")"
pids=()  # the dev server and the workers, stopped by cleanup
cleanup() {
    local status=$? pid
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [ "$status" != 0 ]; then
        for log in "$work"/*.log; do
            [ -s "$log" ] && { echo "--- $log"; tail -n 20 "$log"; } >&2
        done
    fi
    # bar's own helpers of each BAR_HOME (its resident, the task watchers) go too
    python3 -c 'import sys
from pathlib import Path
from bar.changes.fast import resident, watcher
for home in sys.argv[1:]:
    watcher.stop_all(Path(home))
    resident.stop(home)' "$work"/home-* 2>/dev/null || true
    if [ -n "${KEEP:-}" ]; then
        echo "kept $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

here="$(cd "$(dirname "$0")" && pwd)"
. "$here/common.sh"
# (each under a time limit: a step that no worker takes must not hold the demo forever)
step() { show "$@"; timeout --foreground 90 "$@"; }
heading() { printf '\n\033[1;34m== %s\033[0m\n' "$*"; }

# wait (at most $2 seconds) until file $1 holds the text $3, while process $4 lives
wait_for() {
    local file=$1 seconds=$2 text=$3 pid=$4 i
    for ((i = 0; i < seconds * 10; i++)); do
        grep -qF -- "$text" "$file" 2>/dev/null && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "it exited before it was ready; its log:" >&2
            cat "$file" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "not ready after ${seconds}s; its log:" >&2
    cat "$file" >&2
    return 1
}

heading "A Temporal dev server on a free port of 127.0.0.1"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
echo "\$ bar worker dev-server --port $port --db $work/temporal.db &"
# (a BAR_HOME of its own, for its log: nothing is written outside $work)
BAR_HOME="$work/home-server" bar worker dev-server --port "$port" --db "$work/temporal.db" \
    >"$work/server.log" 2>&1 &
pids+=($!)
wait_for "$work/server.log" 60 "Ctrl-C stops it" "${pids[0]}"
cat "$work/server.log"
export BAR_TEMPORAL="127.0.0.1:$port"
echo "BAR_TEMPORAL=$BAR_TEMPORAL: every bar command below finds the server there"

heading "One remote, three machines: a developer's clone and two workers' clones"
step git init -q --bare -b main "$work/remote.git"
git clone -q "$work/remote.git" "$work/dev" 2>/dev/null
cd "$work/dev"
mkdir -p shop
printf '# shop\n\nA tiny shop.\n' > README.md
printf 'def total(prices: list[float]) -> float:\n    return sum(prices)\n' > shop/cart.py
printf 'def slug(text: str) -> str:\n    return text.lower().replace(" ", "-")\n' > shop/utils.py
git add -A && git commit -qm "A tiny shop"
echo "# Each machine has its own BAR_HOME; the developer registers the repository first."
export BAR_HOME="$work/home-dev"
step bar init
git add .bar && git commit -qm "Add bar policy"
step git push -q origin main
for w in w1 w2; do
    git clone -q "$work/remote.git" "$work/$w"
    (cd "$work/$w" && BAR_HOME="$work/home-$w" bar init >/dev/null)
    echo "cloned $work/$w and ran bar init there with BAR_HOME=$work/home-$w"
done

heading "Two workers take steps from the queue \"demo\""
for w in w1 w2; do
    cd "$work/$w"
    echo "\$ (cd $w && BAR_HOME=$work/home-$w BAR_WORKER_NAME=$w bar worker --queue demo) &"
    BAR_HOME="$work/home-$w" BAR_WORKER_NAME=$w bar worker --queue demo >"$work/$w.log" 2>&1 &
    pids+=($!)
done
cd "$work/dev"
wait_for "$work/w1.log" 60 "takes steps" "${pids[1]}"
wait_for "$work/w2.log" 60 "takes steps" "${pids[2]}"
cat "$work/w1.log" "$work/w2.log"

heading "Three tasks, sent to the queue"
step bar task new add-tax --on demo
step bar task new add-discounts --on demo
step bar task new slug-tests --on demo

heading "Two steps sent with --detach, one followed: each worker gets work"
# Each step prints where it ran; the detached two take a few seconds, so they keep both
# workers busy at once, and the followed one waits for the first free worker.
step bar run --on demo --task add-tax --detach -- sh -c \
    'sleep 3; printf "TAX = 0.2\n" >> shop/cart.py; echo "add-tax ran on $BAR_WORKER_NAME"'
step bar run --on demo --task add-discounts --detach -- sh -c \
    'sleep 3; printf "def discount(p: float, pct: float) -> float:\n    return p * (1 - pct / 100)\n" >> shop/cart.py; echo "add-discounts ran on $BAR_WORKER_NAME"'
step bar run --on demo --task slug-tests -- sh -c \
    'mkdir -p tests && printf "from shop.utils import slug\n\nassert slug(\"A B\") == \"a-b\"\n" > tests/test_slug.py && echo "slug-tests ran on $BAR_WORKER_NAME"'

heading "bar fetch brings the detached steps' records back"
# (the demo peeks into the remote to know when both detached steps have been pushed
# back; a developer would just run bar fetch later, or bar run without --detach)
ids=$(bar task list --json | python3 -c 'import json, sys
names = {t["name"]: t["id"] for t in json.load(sys.stdin)}
print(names["add-tax"], names["add-discounts"])')
pushed() {
    local id
    for id in $ids; do
        git -C "$work/remote.git" show "refs/bar/history/$id:ledger.jsonl" 2>/dev/null |
            grep -q '"step_id"' || return 1
    done
}
for ((i = 0; i < 600; i++)); do
    pushed && break
    sleep 0.1
done
pushed || { echo "the detached steps were not back after a minute" >&2; exit 1; }
step bar fetch
step bar task list

heading "Where each step ran, and what it changed, as the developer's machine has it"
echo "# Each step printed the worker it ran on; bar show has what it printed."
ran=()
for t in add-tax add-discounts slug-tests; do
    where=$(bar show 1 --task "$t" | sed -n "s/^$t ran on //p")
    echo "  $t ran on $where"
    ran+=("$where")
done
if [ "$(printf '%s\n' "${ran[@]}" | sort -u | wc -l)" -lt 2 ]; then
    echo "  (this time one worker took all three: the other was slower to ask for work)"
fi
step bar show 1 --task add-discounts
for t in add-tax slug-tests; do
    step bar log --task "$t"
    step bar diff --task "$t" --stat
done

heading "Bring one task back to run here, and land it on main"
step bar task adopt add-discounts
step bar apply --task add-discounts -m "Add percentage discounts to the cart"
step git log --format='%h %s' -2 main
step git show --stat --format= main
step bar task list

echo
echo "Demo finished: three steps ran on two workers; one task's work is now a commit on main."
