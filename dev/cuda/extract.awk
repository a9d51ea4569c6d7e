# extract.awk: one function of a C or CUDA file, by name:  awk -v name=NAME -f extract.awk FILE
# From its signature line (and a template line just before it) to the first line that is
# exactly "}", or the signature line alone when it holds the whole function; a declaration
# (a signature line ending in ";") is skipped. A struct ("struct [alignas(N)] NAME {") runs
# to its "};". Used by check_v1.sh and ../cuda_emu/run.sh.
!found && $0 ~ ("^struct (alignas\\([0-9]+\\) )?" name " [{]") {
    found = 1
    if (prev ~ /^template/) print prev
    print
    next
}
!found && $0 ~ ("^(__global__|__device__|static)([^(]|__launch_bounds__\\([A-Z_0-9]*\\))*[ *]" name "\\(") && $0 !~ /;$/ {
    found = 1
    if (prev ~ /^template/) print prev
    print
    if ($0 ~ /}$/) exit
    next
}
found { print; if ($0 == "}" || $0 == "};") exit }
{ prev = $0 }
