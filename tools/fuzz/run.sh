#!/usr/bin/env bash
# Build and run the libFuzzer harnesses tools/fuzz/fuzz_<family>.c against all
# of csrc/src with AddressSanitizer + UBSan (clang), for a bounded time each.
#
# Usage: tools/fuzz/run.sh [--seconds N] [--replay] [--keep-going] [family ...]
#   --seconds N   fuzz each target N seconds (default 20)
#   --replay      no fuzzing: build every harness with a plain main()
#                 (replay_main.c, $CC, default gcc) and run it on the inputs kept in
#                 tests/data/regressions/<family>/ and tools/fuzz/corpus/<family>/
#   --keep-going  run the remaining targets after a crash (the exit code still says so)
#   family        pool conv fused attention stripe graph sched fixed decode ... (default: every tools/fuzz/fuzz_*.c)
# Prints, per target, executions run and crashes found, then a summary; exits
# 1 if any target crashed (a sanitizer report, a hang over 10 s, a failed
# reference comparison). A crash input is left in tools/build/fuzz/artifacts/<family>/:
# copy it to tests/data/regressions/<family>/ so that the replay keeps it.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=20
replay=0
keep_going=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        --seconds=*) seconds=${1#--seconds=}; shift ;;
        --replay) replay=1; shift ;;
        --keep-going) keep_going=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
if [ ${#targets[@]} -eq 0 ]; then
    for f in tools/fuzz/fuzz_*.c; do
        t=$(basename "$f" .c); targets+=("${t#fuzz_}")
    done
fi

out=tools/build/fuzz
mkdir -p "$out"
mapfile -t srcs < <(find csrc/src -name "*.c" | LC_ALL=C sort)   # every room
INC="-Icsrc/include -Itools/fuzz"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

total_execs=0
total_crashes=0
failed=()
JOBS=${JOBS:-$(nproc)}

# lib DIR CC FLAGS...: every source of csrc/src compiled once (JOBS at a time)
# into DIR/libpe.a, which every harness links (each harness compiled all of
# csrc/src again before)
lib() {
    local dir=$1 cc=$2; shift 2
    mkdir -p "$dir"
    rm -f "$dir"/*.o "$dir/libpe.a"
    printf '%s\n' "${srcs[@]}" | CCX="$cc" FLAGS="$* $INC" OUT="$dir" xargs -P "$JOBS" -I{} \
        bash -c 'f={}; $CCX $FLAGS -c "$f" -o "$OUT/$(basename "${f%.c}").o"' || return 1
    ar rcs "$dir/libpe.a" "$dir"/*.o
}

if [ $replay -eq 1 ]; then
    CC=${CC:-gcc}
    rflags="-std=c99 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
    lib "$out/replay_lib" "$CC" $rflags || { echo "replay: building csrc/src failed"; exit 1; }
    for t in "${targets[@]}"; do
        bin="$out/replay_$t"
        $CC $rflags $INC "tools/fuzz/fuzz_$t.c" tools/fuzz/replay_main.c \
            "$out/replay_lib/libpe.a" -o "$bin" -lm || { echo "fuzz_$t: build failed"; failed+=("$t"); continue; }
        shopt -s nullglob
        inputs=(tests/data/regressions/$t/* tools/fuzz/corpus/$t/*)
        shopt -u nullglob
        if [ ${#inputs[@]} -eq 0 ]; then
            echo "fuzz_$t: 0 inputs replayed"
            continue
        fi
        if "$bin" "${inputs[@]}" > "$out/replay_$t.log" 2>&1; then
            echo "fuzz_$t: ${#inputs[@]} inputs replayed, 0 crashes"
            total_execs=$((total_execs + ${#inputs[@]}))
        else
            echo "fuzz_$t: replay FAILED"; tail -n 30 "$out/replay_$t.log"
            failed+=("$t"); total_crashes=$((total_crashes + 1))
        fi
    done
    echo "replay: $total_execs inputs, ${#failed[@]} targets failed"
    [ ${#failed[@]} -eq 0 ]
    exit $?
fi

command -v clang >/dev/null || { echo "run.sh: clang not found (apt-get install clang)" >&2; exit 2; }
# the library is instrumented for coverage (fuzzer-no-link) so libFuzzer sees
# the edges of the kernels, not only of the harness
lib "$out/fuzz_lib" clang -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
    -fno-sanitize-recover=all || { echo "fuzz: building csrc/src failed"; exit 1; }
for t in "${targets[@]}"; do
    src="tools/fuzz/fuzz_$t.c"
    [ -f "$src" ] || { echo "run.sh: no harness $src" >&2; exit 2; }
    bin="$out/fuzz_$t"
    if ! clang -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
            -fno-sanitize-recover=all $INC "$src" "$out/fuzz_lib/libpe.a" -o "$bin" -lm 2> "$out/build_$t.log"; then
        echo "fuzz_$t: build failed"; cat "$out/build_$t.log"; failed+=("$t"); continue
    fi
    corpus="$out/corpus/$t"
    arts="$out/artifacts/$t"
    mkdir -p "$corpus" "$arts"
    seeds=()
    for d in "tools/fuzz/corpus/$t" "tests/data/regressions/$t"; do
        [ -d "$d" ] && seeds+=("$d")
    done
    before=$(ls "$arts" | wc -l)
    log="$out/fuzz_$t.log"
    t0=$(date +%s)
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=1024 -len_control=0 \
        -print_final_stats=1 -artifact_prefix="$arts/" "$corpus" "${seeds[@]}" > "$log" 2>&1
    rc=$?
    elapsed=$(( $(date +%s) - t0 ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ -z "$execs" ]; then
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
    fi
    execs=${execs:-0}
    after=$(ls "$arts" | wc -l)
    crashes=$((after - before))
    if [ $rc -ne 0 ] && [ $crashes -eq 0 ]; then crashes=1; fi
    total_execs=$((total_execs + execs))
    total_crashes=$((total_crashes + crashes))
    echo "fuzz_$t: $execs executions in ${elapsed} s, $crashes crashes, corpus $(ls "$corpus" | wc -l) inputs"
    if [ $crashes -gt 0 ]; then
        failed+=("$t")
        grep -E 'FUZZ FAILURE|ERROR: |runtime error|SUMMARY' "$log" | head -n 5
        ls -t "$arts" | head -n 3 | sed "s|^|  crash input: $arts/|"
        echo "  log: $log"
        [ $keep_going -eq 1 ] || break
    fi
done
echo "fuzz total: $total_execs executions, $total_crashes crashes, ${#targets[@]} targets"
[ ${#failed[@]} -eq 0 ]
