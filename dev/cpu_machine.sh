#!/usr/bin/env bash
# Sourced by dev/bench_cpu.sh and dev/profile_cpu.sh: the machine their numbers belong to.
# cpu_machine: the CPU's name and the transparent-huge-page setting (the CPU trainer asks
# for huge pages, llmc/utils.h's big_calloc; with "never" it runs slower)
cpu_machine() {
    local thp
    thp=$(grep -oE '\[[a-z]+\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null | tr -d '[]' || true)
    echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), transparent huge pages: ${thp:-unknown}"
}
