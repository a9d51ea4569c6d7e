#!/usr/bin/env bash
# A user's make only warns; the project's own checks (make test, CI) treat warnings as errors.
# So a newer compiler's new warning does not stop a student's build, and still fails make test.
# Checked on a copy of the sources with CFLAGS that make the compiler warn (-Wconversion).
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=0 f=0
check() {  # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then echo "PASS: $1"; p=$((p + 1)); else echo "FAIL: $1"; f=$((f + 1)); fi
}
cp -r Makefile train_gpt_cpu.c llmc "$tmp/"
warn="-O1 -Wconversion"
out=$(env -u WERROR make -C "$tmp" CFLAGS="$warn" train_gpt_cpu 2>&1)
rc=$?
n=$(echo "$out" | grep -c "warning:")
[ $rc -eq 0 ] && [ "$n" -gt 0 ] && [ -x "$tmp/train_gpt_cpu" ]
check "make with CFLAGS='$warn' builds the trainer and shows its warnings ($n)" $?
env -u WERROR make -C "$tmp" -n CFLAGS="$warn" test 2>/dev/null | grep -q "^gcc .* -Werror .*-o train_gpt_cpu "
check "make test rebuilds that trainer with warnings as errors" $?
env WERROR=-Werror make -C "$tmp" CFLAGS="$warn" train_gpt_cpu >/dev/null 2>&1
rc=$?
[ $rc -ne 0 ]
check "and that build fails on the warnings" $?
echo "$p passed, $f failed"
[ $f -eq 0 ]
