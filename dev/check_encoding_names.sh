#!/usr/bin/env bash
# No encoding or scheme named outside its table: what code needs to know of a --pe or --pos
# (it rotates, its frequencies scale, its positions are explicit, ...) is a column of its row
# in llmc/schedule.h (PE_TABLE, POS_TABLE, ROTARY_TABLE) or llmc/attn_bias.h, read as
# pe_is(pe, PEF_...), pos_is(s, POSF_...) or a function the row names: never a comparison
# with a PE_* or POS_* constant. This check fails on any such comparison (==, != or a case
# label) in a C or CUDA source outside the tests (test_gpt.c, dev/cuda_emu's, dev/fuzz's),
# one FAIL line per place, and first proves on planted lines that it sees each form.
# Prints PASS/FAIL lines and "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
# a comparison with a constant of the tables: x == PE_ROPE, PE_ROPE != x, case POS_RPE:
PATTERN='([=!]=[[:space:]]*(PE|POS)_[A-Z0-9_]+\b)|(\b(PE|POS)_[A-Z0-9_]+[[:space:]]*[=!]=)|(case[[:space:]]+(PE|POS)_[A-Z0-9_]+[[:space:]]*:)'
passed=0 failed=0
pass() { echo "PASS: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; failed=$((failed + 1)); }

# the pattern sees every form, and not the columns' tests
planted='if (ps->pe != PE_ROPE) return;
    return pe == PE_LEARNED || pe == PE_TUPE;
int n = PE_ALIBI == c->pe;
    case POS_RPE: return 1;
REQUIRE(c->pos_scheme != POS_RANDOM_BASE || x, "");'
n=$(grep -cE "$PATTERN" <<< "$planted")
[ "$n" -eq 5 ] && pass "the check sees == , != and case labels with PE_ and POS_ constants (5 of 5 planted)" ||
    fail "the check sees $n of 5 planted comparisons"
clean='if (!pe_rotates(ps->pe)) return;
    if (pe_is(c->pe, PEF_UNTIED)) x = 1;
    if (pos_is(s, POSF_EXPLICIT)) x = 1;
    c->pe = PE_ROPE;
    for (int pe = 0; pe < PE_N; pe++) x = PEF_POSITIONS == 1;'
n=$(grep -cE "$PATTERN" <<< "$clean")
[ "$n" -eq 0 ] && pass "column tests, assignments and loops over the tables are not comparisons" ||
    fail "the check takes $n of 5 column tests for comparisons"

sources=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' | grep -vE '^(test_gpt\.c|dev/cuda_emu/test_[^/]*|dev/fuzz/.*)$')
hits=$(grep -nE "$PATTERN" $sources)
if [ -z "$hits" ]; then
    pass "no C or CUDA source outside the tests compares with a PE_ or POS_ constant ($(wc -w <<< "$sources") files)"
else
    while IFS= read -r h; do
        fail "$h: a comparison with an encoding's or scheme's name; test a column of its row instead (llmc/schedule.h)"
    done <<< "$hits"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
