#!/usr/bin/env bash
# Builds and runs the core benchmarks (ring throughput, sampler overhead) and rewrites bench/results/:
# ring.json, sampler.json and their section of README.md (generated from both;
# the README is shared with the other benchmarks, whose sections are kept).
#
# Environment:
#   BUILD_DIR  CMake build folder for ring_bench and sleep_floor (default build/bench)
#   VENV       virtual environment the package is installed into (default build/bench-venv)
#   PYTHON     interpreter that creates VENV (default python3)
#   RING_ARGS, SAMPLER_ARGS  extra arguments for ring_bench / sampler_bench.py
#              (e.g. RING_ARGS="--reps 5" SAMPLER_ARGS="--seconds 2 --reps 1" for a smoke run)
#   MULTIGPU_ARGS  extra arguments for multigpu_bench.py (e.g. "--quick" for a smoke run,
#              which writes nothing); it writes multigpu.json, multigpu.png and its README section
#   REALTRACE_ARGS  extra arguments for realtrace_speed.py (e.g. "--quick"); it needs the real traces
#              ($FINGRAV_REAL_DATA, tests/real_data.py; skipped without them) and writes realtrace_speed.json
#              and its README section
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build/bench}
venv=${VENV:-$root/build/bench-venv}
python=${PYTHON:-python3}
results=$root/bench/results
mkdir -p "$results"

echo "== building ring_bench and sleep_floor in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFINGRAV_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target ring_bench sleep_floor

echo "== installing fingrav-native from $root into $venv"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# A local path is always rebuilt, so the sampler measured is this tree's.
"$venv/bin/python" -m pip install --quiet "$root"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Results go to .tmp files first (git-ignored) so an interrupted run never
# leaves half-written results next to the committed ones.
echo "== ring throughput"
# shellcheck disable=SC2086  # RING_ARGS is a list of words on purpose
"$build/bench/ring_bench" --json "$results/ring.json.tmp" ${RING_ARGS:-}

echo "== sampler vs Python loop"
# shellcheck disable=SC2086
"$venv/bin/python" "$root/bench/sampler_bench.py" --json "$results/sampler.json.tmp" \
  --sleep-floor "$build/bench/sleep_floor" ${SAMPLER_ARGS:-}

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
mv "$results/ring.json.tmp" "$results/ring.json"
mv "$results/sampler.json.tmp" "$results/sampler.json"
"$venv/bin/python" "$root/bench/summarize_ring_sampler.py" --results "$results" \
  --load "1/5/15-min $load_before at the start, $load_after at the end"
echo "== wrote $results/ring.json, $results/sampler.json, $results/README.md"

# Virtual time (SimNode): needs no build of its own, only the package; writes its
# results itself (JSON, PNG, README section), so it runs after the summary above.
echo "== many GPUs: merge and stitch cost against ranks, alignment error"
# shellcheck disable=SC2086
"$venv/bin/python" "$root/bench/multigpu_bench.py" ${MULTIGPU_ARGS:-}

echo "== real traces: profile_trace against a plain parse, quiet and beside busy processes"
# shellcheck disable=SC2086
"$venv/bin/python" "$root/bench/realtrace_speed.py" ${REALTRACE_ARGS:-}
