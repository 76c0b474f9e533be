#!/usr/bin/env bash
# C checks beyond Python:
#  1. every csrc/src/**/*.c compiles with -std=c99 -Wall -Wextra -Werror -pedantic;
#  2. every csrc/tests/test_*.c is built with AddressSanitizer + UBSan against
#     all of csrc/src and run (a test prints 'N passed, M failed');
#  3. the same sources cross-compile for a Cortex-M4 with arm-none-eabi-gcc
#     (-mcpu=cortex-m4 -mthumb -O2 -ffreestanding -Werror) and the code size of
#     each object is printed with arm-none-eabi-size.
# Usage: tools/check_c.sh [host|sanitize|cross|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
out=tools/build
mkdir -p "$out/host" "$out/test" "$out/arm"
CC=${CC:-gcc}
JOBS=${JOBS:-$(nproc)}
WARN="-std=c99 -Wall -Wextra -Werror -pedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wconversion -Wno-sign-conversion"
INC="-Icsrc/include"
mapfile -t srcs < <(find csrc/src -name "*.c" | LC_ALL=C sort)   # every room

host() {
    echo "== host: strict C99 compile of ${#srcs[@]} files"
    printf '%s\n' "${srcs[@]}" | FLAGS="$WARN $INC -O2" OUT="$out/host" CC="$CC" xargs -P "$JOBS" -I{} \
        bash -c 'f={}; $CC $FLAGS -c "$f" -o "$OUT/$(basename "${f%.c}").o"'
    echo "ok"
}

sanitize() {
    echo "== sanitizers: C unit tests with -fsanitize=address,undefined"
    shopt -s nullglob
    local tests=(csrc/tests/test_*.c)
    if [ ${#tests[@]} -eq 0 ]; then echo "no C tests found"; exit 1; fi
    # every source is compiled once into an archive that each test links
    # against (it was compiled again for each of the tests), in $JOBS parallel
    # jobs; then the tests are built and run $JOBS at a time, each one's output
    # kept in a log that is printed in order afterwards
    local san="-std=c99 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all $INC -Icsrc/tests"
    mkdir -p "$out/test/obj"
    rm -f "$out/test/obj/"*.o "$out/test/libpe_san.a" "$out/test/"*.log "$out/test/"*.failed
    printf '%s\n' "${srcs[@]}" | SAN="$san" OUT="$out/test/obj" CC="$CC" xargs -P "$JOBS" -I{} \
        bash -c 'f={}; b=$(basename "${f%.c}"); $CC $SAN -c "$f" -o "$OUT/$b.o"'
    ar rcs "$out/test/libpe_san.a" "$out/test/obj/"*.o
    printf '%s\n' "${tests[@]}" | SAN="$san" OUT="$out/test" CC="$CC" xargs -P "$JOBS" -I{} bash -c '
        t={}; bin="$OUT/$(basename "${t%.c}")"
        {
            if $CC $SAN "$t" "$OUT/libpe_san.a" -o "$bin" -lm &&
               ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$bin"; then
                rm -f "$bin.failed"
            else
                echo "FAILED: $bin"; touch "$bin.failed"
            fi
        } > "$bin.log" 2>&1' || true
    local fail=0
    for t in "${tests[@]}"; do
        local bin="$out/test/$(basename "${t%.c}")"
        cat "$bin.log"
        if [ -e "$bin.failed" ] || [ ! -e "$bin.log" ]; then fail=1; fi
    done
    return $fail
}

cross() {
    echo "== cross: arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -O2 -ffreestanding"
    if ! command -v arm-none-eabi-gcc >/dev/null; then
        echo "arm-none-eabi-gcc not found (apt-get install gcc-arm-none-eabi)"; exit 1
    fi
    local objs=()
    for f in "${srcs[@]}"; do objs+=("$out/arm/$(basename "${f%.c}").o"); done
    printf '%s\n' "${srcs[@]}" | FLAGS="-std=c99 -Wall -Wextra -Werror -pedantic -mcpu=cortex-m4 -mthumb -mfloat-abi=soft -O2 -ffreestanding -ffunction-sections -fdata-sections $INC" \
        OUT="$out/arm" xargs -P "$JOBS" -I{} \
        bash -c 'f={}; arm-none-eabi-gcc $FLAGS -c "$f" -o "$OUT/$(basename "${f%.c}").o"'
    arm-none-eabi-size -t "${objs[@]}"
}

case "$what" in
    host) host ;;
    sanitize) sanitize ;;
    cross) cross ;;
    all) host; sanitize; cross ;;
    *) echo "usage: $0 [host|sanitize|cross|all]"; exit 2 ;;
esac
