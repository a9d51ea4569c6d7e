#!/usr/bin/env bash
# Every header in llmc/ compiles on its own (its includes are complete), as C11 with the
# project's warnings. Part of make test.
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
echo "$p passed, $f failed, 0 skipped"
[ "$f" -eq 0 ]
