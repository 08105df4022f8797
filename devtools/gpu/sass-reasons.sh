#!/usr/bin/env bash
# Nsight Compute on the four cases where CUDA's best variant stays 3-4% short of Triton on the
# H200 (RMSNorm fp32 and fp16 8192x16384, LayerNorm two_pass fp32 and fp16 32768x4096), each
# kernel at the config its record in docs/results/h200.jsonl ran (pinned: profile-cases.py's
# CONFIG), CUDA beside Triton, from the repository root on a GPU host with PYTHONPATH set as
# for open-checks.sh; ~4 minutes (limits add to 500 s). It reads against the static comparison
# of `devtools/numba-sass --triton/--cuda` at the same configs (issue 34's note, session 32):
#   - the metrics of each reason ranked there (--metrics below): instructions issued, issue
#     slots busy, warp stalls by reason, DRAM and L2 throughput, achieved occupancy;
#   - the source page (SASS, per instruction): where the stall samples fall, e.g. on the
#     first use of each weight load of the CUDA kernels' write phase.
# CASES_FILE=FILE profiles FILE's cases instead (one a line, `#` lines left out), e.g.
# devtools/gpu/numba-long-rows.cases.
# Everything comes back in $OUT/out-sass-reasons.tgz: the report (sass-reasons.ncu-rep), its
# details page and its SASS source page as CSV.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
git log --oneline -1 | tee "$OUT/version.txt"
export PYTHONUNBUFFERED=1
if [ -n "${CASES_FILE:-}" ]; then   # one case a line, as profile-cases.py takes them
  mapfile -t CASES < <(grep -v '^#' "$CASES_FILE" | grep .)
else
  CASES=(
    'rmsnorm:cuda:tuned:float32:8192x16384:{"group": 512, "packs": 0, "threads": 512, "trip": 4}'
    'rmsnorm:triton:-:float32:8192x16384:{"rows": 1, "num_warps": 16, "persistent": false, "hints": "plain", "early": true, "loop_block": 4096}'
    'rmsnorm:cuda:tuned:float16:8192x16384:{"group": 256, "packs": 8, "threads": 256}'
    'rmsnorm:triton:-:float16:8192x16384:{"rows": 1, "num_warps": 16, "persistent": false, "hints": "plain", "early": true, "loop_block": 4096}'
    'layernorm:cuda:two_pass:float32:32768x4096:{"group": 256, "packs": 4, "threads": 256}'
    'layernorm:triton:two_pass:float32:32768x4096:{"rows": 1, "num_warps": 8, "persistent": false, "hints": "plain", "early": true, "loop_block": 2048}'
    'layernorm:cuda:two_pass:float16:32768x4096:{"group": 128, "packs": 4, "threads": 256}'
    'layernorm:triton:two_pass:float16:32768x4096:{"rows": 1, "num_warps": 8, "persistent": false, "hints": "plain", "loop_block": 2048}'
  )
fi
if printf '%s\n' "${CASES[@]}" | grep -q ':cuda:'; then
  step cuda-build 120 python3 -m impls._frameworks.cuda.build
fi
METRICS=smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_op_read_hit_rate.pct,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,gpu__time_duration.sum
if command -v ncu > /dev/null; then
  step ncu 300 ncu --nvtx --nvtx-include "profile/" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section SourceCounters --metrics "$METRICS" -o "$OUT/sass-reasons" -f \
    python3 devtools/gpu/profile-cases.py "${CASES[@]}"
  step details 60 ncu -i "$OUT/sass-reasons.ncu-rep" --page details --csv
  cp "$OUT/details.log" "$OUT/details.csv"
  step source 60 ncu -i "$OUT/sass-reasons.ncu-rep" --page source --print-source sass --csv
  cp "$OUT/source.log" "$OUT/source-sass.csv"
else
  echo "no ncu here" | tee -a "$OUT/steps.log"; status=1
fi
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
