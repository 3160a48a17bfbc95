#!/usr/bin/env bash
# Run the Node.js golden-file consumer and check it with `npoptim verify`:
#   1. its Adam and SparseAdam must pass every case of cases/Adam.json and cases/SparseAdam.json
#      (the Keras and optax flavor cases of Adam it declares skipped: it implements torch's
#      conventions, and verify reports them apart from failures), and the bfloat16/float16
#      per-op and fused cases of cases/precision/Adam.json (schema version 3) and the 16-bit
#      SparseAdam cases of cases/precision/SparseAdam.json (CSR gradients in the 16-bit type);
#   2. the same consumer with a deliberate eps-placement bug must fail, and verify must name
#      the step where it diverges.
# Exit 0 only if both hold. Results go to a temporary directory, removed at exit.
# Environment: PYTHON (default python3), NODE (default node), GOLDEN_CASES (default
# reference_results/cases of this checkout).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
node="${NODE:-node}"
cases="${GOLDEN_CASES:-$root/reference_results/cases}"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

verify() { "$python" -m npoptim verify "$cases" "$@" --optimizer Adam --optimizer SparseAdam --summary; }
verify_torch() { verify "$@" --flavor torch; }

echo "== Node consumer: Adam + SparseAdam"
flavored=()
for f in "$cases"/*/Adam.json; do [ -e "$f" ] && flavored+=("$f"); done
"$node" "$here/golden_consumer.mjs" -o "$out/results.json" "$cases/Adam.json" "$cases/SparseAdam.json" "${flavored[@]}"
if ! verify "$out/results.json"; then
  echo "run.sh: the Node consumer does not pass npoptim verify" >&2
  exit 1
fi
if [ -e "$cases/precision/Adam.json" ]; then  # the 16-bit cases are verified when selected
  echo "== Node consumer: bfloat16/float16 Adam (cases/precision/Adam.json)"
  if ! "$python" -m npoptim verify "$cases/precision/Adam.json" "$out/results.json" --summary; then
    echo "run.sh: the Node consumer does not pass npoptim verify on the 16-bit cases" >&2
    exit 1
  fi
fi
if [ -e "$cases/precision/SparseAdam.json" ]; then  # 16-bit CSR gradients
  echo "== Node consumer: bfloat16/float16 SparseAdam (cases/precision/SparseAdam.json)"
  "$node" "$here/golden_consumer.mjs" -o "$out/sparse16.json" "$cases/precision/SparseAdam.json"
  if ! "$python" -m npoptim verify "$cases/precision/SparseAdam.json" "$out/sparse16.json" --summary; then
    echo "run.sh: the Node consumer does not pass npoptim verify on the 16-bit SparseAdam cases" >&2
    exit 1
  fi
fi

echo
echo "== Node consumer with --bug eps-placement (must fail)"
"$node" "$here/golden_consumer.mjs" --bug eps-placement -o "$out/buggy.json" "$cases/Adam.json" "$cases/SparseAdam.json" "${flavored[@]}"
set +e
verify_torch "$out/buggy.json" | tee "$out/buggy.txt"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 1 ]; then
  echo "run.sh: verify of the buggy results exited $status, expected 1 (cases fail)" >&2
  exit 1
fi
if ! grep -q "diverges at step" "$out/buggy.txt"; then
  echo "run.sh: verify did not name the step where the buggy results diverge" >&2
  exit 1
fi
echo
echo "run.sh: OK: the consumer passes; the eps-placement bug is caught ($(grep -c '^  -> .* diverges at step' "$out/buggy.txt") cases diverge)"
