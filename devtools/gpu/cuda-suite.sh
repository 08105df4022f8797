#!/usr/bin/env bash
# After the 16-bit exp (issue 34) and CuPy's subnormal-keeping fp32 softmax (issue 35), on a
# bare H200 host from the repository root with PYTHONPATH=/tmp/site:$PWD, within 6 minutes:
#   1. softmax at 32768x4096, CuPy's raw variants (NVRTC, -ftz=true) beside CUDA's, fp32 and bf16;
#   2. sum and max at 2^28 elements, CuPy (idiomatic, two_pass, atomic) beside CUDA, three dtypes;
#   3. the CUDA GPU tests the changed kernels touch or that the last runs did not reach: the
#      softmax and chain impls at full size, every 1-D impl of ours on views at odd offsets in
#      fp32, bf16 and fp16, the stream check, a lost context; CuPy's raw softmax in every config
#      on rows at odd offsets.
# Everything comes back packed in $OUT/out.tgz (steps.sh).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
python3 -m impls._frameworks.cuda.build > "$OUT/cuda-build.log" 2>&1
echo "cuda build exit $?" | tee -a "$OUT/steps.log"
harness softmax 60 op=softmax "impl=[cupy,cuda]" "dtype=[bf16,fp32]" "shapes=[[32768,4096]]"
harness reductions 90 "op=[sum,max]" "impl=[cupy,cuda]" "dtype=[bf16,fp16,fp32]" "shapes=[[268435456]]"
step gpu-tests 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py --durations=10 -k \
  "(full_size and cuda and (softmax or rmsnorm_silu)) or (odd_offsets_and_odd_sizes and cuda) or stream_check or lost_cuda or (cupy_raw_row and softmax)"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
