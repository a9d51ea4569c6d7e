#!/usr/bin/env bash
# Every header in llmc/ compiles on its own (its includes are complete), as C11 with the
# project's warnings; and every CUDA header in llmc/cuda/ with nvcc, warnings as errors
# (where nvcc is; about 5 s each). Part of make test.
cd "$(dirname "$0")/.." || exit 1
p=0 f=0
for h in llmc/*.h; do
    if out=$(echo "#include \"$h\"" | gcc -std=c11 -fopenmp -Wall -Wextra -Werror -Wno-unused-function -Wno-unused-variable \
                 -I. -x c -c -o /dev/null - 2>&1); then
        echo "PASS: $h compiles on its own"; p=$((p + 1))
    else
        echo "FAIL: $h does not compile on its own: $(echo "$out" | grep -m1 error)"; f=$((f + 1))
    fi
done
s=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for h in llmc/cuda/*.cuh; do
    if ! command -v nvcc >/dev/null; then
        echo "SKIP: $h: no nvcc on this machine"; s=$((s + 1)); continue
    fi
    if out=$(echo "#include \"$h\"" > "$tmp/h.cu" &&
             nvcc -std=c++17 -arch=sm_90 -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-function -Werror all-warnings -I. \
                 -c -o /dev/null "$tmp/h.cu" 2>&1); then
        echo "PASS: $h compiles on its own (nvcc)"; p=$((p + 1))
    else
        echo "FAIL: $h does not compile on its own: $(echo "$out" | grep -m1 error)"; f=$((f + 1))
    fi
done
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
