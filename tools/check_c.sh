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
WARN="-std=c99 -Wall -Wextra -Werror -pedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wconversion -Wno-sign-conversion"
INC="-Icsrc/include"
mapfile -t srcs < <(find csrc/src -name "*.c" | LC_ALL=C sort)   # every room

host() {
    echo "== host: strict C99 compile of ${#srcs[@]} files"
    for f in "${srcs[@]}"; do
        $CC $WARN $INC -O2 -c "$f" -o "$out/host/$(basename "${f%.c}").o"
    done
    echo "ok"
}

sanitize() {
    echo "== sanitizers: C unit tests with -fsanitize=address,undefined"
    local fail=0
    shopt -s nullglob
    local tests=(csrc/tests/test_*.c)
    if [ ${#tests[@]} -eq 0 ]; then echo "no C tests found"; exit 1; fi
    for t in "${tests[@]}"; do
        local bin="$out/test/$(basename "${t%.c}")"
        $CC -std=c99 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer \
            -fsanitize=address,undefined -fno-sanitize-recover=all $INC -Icsrc/tests \
            "$t" "${srcs[@]}" -o "$bin" -lm
        if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$bin"; then
            echo "FAILED: $bin"; fail=1
        fi
    done
    return $fail
}

cross() {
    echo "== cross: arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -O2 -ffreestanding"
    if ! command -v arm-none-eabi-gcc >/dev/null; then
        echo "arm-none-eabi-gcc not found (apt-get install gcc-arm-none-eabi)"; exit 1
    fi
    local objs=()
    for f in "${srcs[@]}"; do
        local o="$out/arm/$(basename "${f%.c}").o"
        arm-none-eabi-gcc -std=c99 -Wall -Wextra -Werror -pedantic -mcpu=cortex-m4 -mthumb \
            -mfloat-abi=soft -O2 -ffreestanding -ffunction-sections -fdata-sections $INC -c "$f" -o "$o"
        objs+=("$o")
    done
    arm-none-eabi-size -t "${objs[@]}"
}

case "$what" in
    host) host ;;
    sanitize) sanitize ;;
    cross) cross ;;
    all) host; sanitize; cross ;;
    *) echo "usage: $0 [host|sanitize|cross|all]"; exit 2 ;;
esac
