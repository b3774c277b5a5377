#!/usr/bin/env bash
# The smollm2-135m-cpu recipe evaluated on the VISTA human dev set, twice with the same seed: the second
# run compares its metrics, tests and intervals with the first (results.json "compare"). The second
# run's report.md, results.json and plots are copied to bench/results/eval_smollm2_135m_cpu/.
#
#   bash bench/eval_smollm2_135m_cpu.sh [INPUT] [extra eval arguments, e.g. --limit 10]
#
# eval.threads=1: on a busy 2-core machine one torch thread is several times faster than two.
set -euo pipefail
cd "$(dirname "$0")/.."
input=${1:-../shared/data/vista_human/dev.json}
shift || true
runs=runs/smollm2-135m-cpu
dest=bench/results/eval_smollm2_135m_cpu
args=(--config recipes/smollm2-135m-cpu.yaml --input "$input" --no-progress eval.threads=1 "$@")
if [ ! -f "$runs/eval_run1/results.json" ]; then
  vista-distill eval "${args[@]}" --output-dir "$runs/eval_run1"
fi
vista-distill eval "${args[@]}" --output-dir "$runs/eval_run2" --compare "$runs/eval_run1/results.json"
mkdir -p "$dest"
cp "$runs/eval_run2/report.md" "$runs/eval_run2/results.json" "$runs"/eval_run2/*.png "$dest/"
python - "$dest/results.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["compare"]
print(f"re-run identical: {c['identical']} (fingerprint {r['fingerprint'][:16]} vs {c['previous_fingerprint'][:16]})")
for d in c["differences"]:
    print("  ", d)
EOF
