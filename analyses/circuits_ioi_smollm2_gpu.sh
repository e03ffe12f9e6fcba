#!/bin/bash
# The jobs of analyses/circuits_ioi_smollm2.py side by side on a lent GPU (../shared/gpu/README.md: wheels and
# SmolLM2's GGUF carried in two calls, the GGUF's first part copied to /tmp/gguf.part-aa by the first). Results go to
# /tmp/mib and, every 10 s and at the end, into one tarball $OUT/mib.tgz (the device returns few files).
#   JOBS="greater-than/node-kl ..." JOB_SECONDS=500 bash analyses/circuits_ioi_smollm2_gpu.sh GGUF_PART_AB GGUF_PART_AC
export PYTHONPATH=/tmp/site:$PWD HEURLENS_CACHE=/tmp/hlcache OMP_NUM_THREADS=1
t0=$(date +%s)
gguf=$HEURLENS_CACHE/models/smollm2-gguf/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$(dirname "$gguf")" /tmp/mib /tmp/site/plotly
[ -f "$gguf" ] || cat /tmp/gguf.part-aa "$@" > "$gguf"
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $gguf" | sha256sum -c || exit 1
# no figure is drawn here: stand-ins for plotly, which the device image lacks
[ -f /tmp/site/plotly/offline.py ] || { touch /tmp/site/plotly/__init__.py /tmp/site/plotly/graph_objects.py
  echo "def make_subplots(*a, **k): raise RuntimeError('plotly stand-in')" > /tmp/site/plotly/subplots.py
  echo "def get_plotlyjs(): return ''" > /tmp/site/plotly/offline.py; }
python3 -c "from heurlens.models.smollm2 import smollm2_dir; print(smollm2_dir())" || exit 1
for job in ${JOBS:-$(python3 analyses/circuits_ioi_smollm2.py jobs)}; do
  timeout "${JOB_SECONDS:-480}" python3 analyses/circuits_ioi_smollm2.py run "$job" --out /tmp/mib \
    > "/tmp/mib/${job//\//_}.log" 2>&1 &
done
while [ -n "$(jobs -r)" ]; do
  sleep 10
  tar czf "$OUT/mib.tgz" -C /tmp mib 2>/dev/null
  echo "$(( $(date +%s) - t0 )) s: $(ls /tmp/mib/scores/*/ 2>/dev/null | grep -c json) score files"
done
tar czf "$OUT/mib.tgz" -C /tmp mib
grep -l Traceback /tmp/mib/*.log
