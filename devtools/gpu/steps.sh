# Sourced by the GPU scripts beside it: $OUT (the folder whose files come back) and
# $HARNESS_CACHE set up, `harness NAME LIMIT_S OVERRIDES...` (one harness run as a step, its
# records kept as $OUT/NAME.jsonl), and `step NAME LIMIT_S COMMAND...`, which runs a command under its own
# limit, logs it to $OUT/NAME.log and $OUT/steps.log, and keeps the worst exit status in
# $status. The limit sends SIGINT first: the harness then records what it measured and pytest
# prints its failures' tracebacks; a kill follows 30 s later.
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the results}
export HARNESS_CACHE=${HARNESS_CACHE:-/tmp/hc}
mkdir -p "$OUT" "$HARNESS_CACHE"
status=0
# The GPU machine returns only a few files from $OUT: at exit everything under it but the
# archives is packed into $OUT/out-<script>.tgz (read it with `tar xzf`), so that scripts run
# one after another in one call each leave their own.
PACKED="out-$(basename "$0" .sh).tgz"
pack_out() { (cd "$OUT" && tar czf "/tmp/$PACKED" --exclude='out*.tgz' . \
  && find . -mindepth 1 ! -name 'out*.tgz' -delete && mv "/tmp/$PACKED" "$PACKED"); }
trap pack_out EXIT
step() {
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  local began=$SECONDS
  timeout --signal=INT --kill-after=30 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - began)) s" | tee -a "$OUT/steps.log"
  tail -5 "$OUT/$name.log"
  [ $rc -gt $status ] && status=$rc
  return 0
}
harness() {   # harness NAME LIMIT OVERRIDES...: one run, its records kept as $OUT/NAME.jsonl
  local name=$1 limit=$2; shift 2
  step "$name" "$limit" python3 -m harness "$@" tracking=none "hydra.run.dir=/tmp/runs/$name"
  cp "/tmp/runs/$name/results.jsonl" "$OUT/$name.jsonl" 2>/dev/null
}
