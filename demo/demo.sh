#!/usr/bin/env bash
# A real bar session in a throwaway repository: a scripted agent works in a task, the
# ledger is reviewed, a bad turn is rolled back (and the rollback undone and redone), and
# the result is applied to main. Nothing outside a temporary directory is touched.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/bar-demo.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export BAR_HOME="$work/bar-home"
. "$here/common.sh"
step() { show "$@"; "$@"; }

repo="$work/shop"
mkdir -p "$repo/shop"
cd "$repo"
git init -q
printf '# shop\n\nA tiny shop.\n' > README.md
printf 'def total(prices: list[float]) -> float:\n    return sum(prices)\n' > shop/cart.py
printf 'def legacy() -> None:\n    pass\n' > shop/legacy.py
printf 'def slug(text: str) -> str:\n    return text.lower().replace(" ", "-")\n' > shop/utils.py
printf '__pycache__/\n' > .gitignore
git add -A && git commit -qm "A tiny shop"

agent="python3 $here/agent.py"
step bar init
echo "# bar init wrote a default policy into the repository; the developer commits it."
git add .bar && git commit -qm "Add bar policy"
step bar task new add-discounts -d "Add percentage discounts to the cart"
step bar run --no-pty -- $agent implement
step bar run --no-pty -- $agent overreach
echo
echo "# The policy stops destructive commands before they run (the attempt is recorded)."
step bar run --no-pty -- sh -c 'cd /tmp && rm -rf / --no-preserve-root' || true
step bar log
step bar show 1
step bar diff --stat
echo
echo "# The second turn went too far: roll back to the state after step 1."
step bar rollback --to 1
echo
echo "# Changed our mind? A rollback is a step too: undo it, then redo it."
step bar undo
step bar redo
step bar log
echo
echo "# Land the work on main as one commit."
step bar apply --dry-run
step bar apply -m "Add percentage discounts to the cart"
step git log --format='%h %s%n%b' -1 main
step git status --short
echo
echo "Demo finished: the developer's checkout now has the agent's good turn, as one commit."
