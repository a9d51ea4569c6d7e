#!/usr/bin/env bash
# Sourced by dev/bench_cpu.sh and dev/profile_cpu.sh: the machine their numbers belong to.
# cpu_machine: the CPU's name with its family and model (one "AMD EPYC" name covers Zen 3,
# AVX2 only, and Zen 4, with AVX-512), its widest vector instructions, and the transparent-
# huge-page setting (the CPU trainer asks for huge pages, llmc/utils.h's big_calloc; with
# "never" it runs slower)
cpu_machine() {
    local thp flags isa=SSE
    thp=$(grep -oE '\[[a-z]+\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null | tr -d '[]' || true)
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    [[ $flags == *" avx2 "* && $flags == *" fma "* ]] && isa="AVX2 + FMA"
    [[ $flags == *" avx512f "* ]] && isa="AVX-512"
    echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (family $(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | xargs), model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | xargs)), $isa, transparent huge pages: ${thp:-unknown}"
}
