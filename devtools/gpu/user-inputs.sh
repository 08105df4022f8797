#!/usr/bin/env bash
# The CLI's input checks (session 29), on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD. The branch changes the CLI's plumbing only: every key given is
# checked against conf/ before Hydra runs (harness.keys), the flags and roof settings are
# checked, triton_compile defaults to $HARNESS_TRITON_COMPILE, a HARNESS_CACHE that cannot be
# written is named. This checks on a GPU that a normal run and one with
# HARNESS_TRITON_COMPILE=serial still run and pass, and that the refused
# inputs exit 2 with their message (each step's log says which). Everything under $OUT;
# under 4 minutes.
source "$(dirname "$0")/steps.sh"

git log --oneline -1 | tee "$OUT/versions.txt"

harness triton-serial 150 op=rmsnorm impl=triton,eager dtype=bf16 'shapes=[[4096,4096],[1823,781]]' \
  roof.max_age_s=0 ops.rmsnorm.params.eps=1e-5 strict=true
HARNESS_TRITON_COMPILE=serial harness triton-env 120 op=softmax impl=triton dtype=bf16 \
  'shapes=[[4096,4096]]' tuning=fresh strict=true
for bad in shape=[[4096,4096]] strict=no roof.bytes=0 +ops.rmsnorm.params.epsilon=1 sweep.seeds=1; do
  step "refused-${bad%%=*}" 60 bash -c "python3 -m harness op=rmsnorm impl=eager tracking=none $bad; \
    rc=\$?; echo exit \$rc; [ \$rc -eq 2 ]"
done
step cache-file 60 bash -c "touch /tmp/not-a-folder && HARNESS_CACHE=/tmp/not-a-folder python3 -m harness \
  op=copy impl=eager dtype=fp32 'shapes=[[4096]]' tracking=none 2>&1 | grep 'HARNESS_CACHE: /tmp/not-a-folder cannot be written'"
exit $status
