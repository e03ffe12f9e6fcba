#!/bin/bash
# The mask jobs of analyses/circuits_ioi_smollm2.py that this 2-core CPU can pay, one after another in one
# one-thread background process (the other core stays free): warm starts from EAP-IG, 60 steps (a cold run's
# default is 300), 3 seeds stacked. Resumable by job: a job whose score file exists is skipped, so running this
# again continues where it stopped (a job cut short starts over). The full schedule is the GPU script's
# (circuits_ioi_smollm2_gpu.sh, every job at prune's defaults). DTYPE=bfloat16: the masks trained in bfloat16 (about
# 3x faster on this AVX-512 BF16 CPU; scored in float32), written as JOB-bf16; JOBS="..." for other jobs.
#   nohup bash analyses/circuits_ioi_smollm2_cpu.sh runs/mib > runs/mib-cpu.log 2>&1 &
out=${1:-runs/mib}
export OMP_NUM_THREADS=1
for job in ${JOBS:-ioi/edge-kl-ranking-warm greater-than/edge-kl-ranking-warm ioi/edge-kl-warm \
    greater-than/edge-kl-warm ioi/node-kl-ranking-warm greater-than/node-kl-ranking-warm \
    ioi/edge-logit-diff-ranking-warm greater-than/edge-logit-diff-ranking-warm}; do
  suffix=$([ "${DTYPE:-float32}" = bfloat16 ] && echo -bf16)
  if [ -f "$out/scores/$job$suffix.json" ]; then echo "$job: scored already"; continue; fi
  start=$(date +%s)
  python analyses/circuits_ioi_smollm2.py run "$job" --out "$out" --steps "${STEPS:-60}" --dtype "${DTYPE:-float32}" \
    || exit 1
  echo "$job: $(( $(date +%s) - start )) s"
done
