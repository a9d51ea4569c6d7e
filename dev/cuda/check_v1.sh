#!/usr/bin/env bash
# check_v1.sh: every copy of trainer code in dev/cuda (each v1, and the flash versions) must
# stay a verbatim copy of the code train_gpt.cu runs, so that the benchmarks measure the
# trainer. Compares each function (extract.awk: its template line, signature and body)
# between train_gpt.cu and the dev/cuda file.
# Needs no GPU. Exit 0 when all are identical, 1 otherwise (the diff is printed).
set -u
cd "$(dirname "$0")" || exit 1
SRC=../../train_gpt.cu
PAIRS="common.h:warp_sum common.h:warp_max common.h:block_sum common.h:block_max
common.h:Pack128 common.h:load128 common.h:store128
rope.cu:rope_kernel
rmsnorm.cu:rmsnorm_forward_kernel rmsnorm.cu:rmsnorm_backward_kernel rmsnorm.cu:rmsnorm_dw_kernel rmsnorm.cu:rmsnorm_backward
attention.cu:softmax_forward_kernel attention.cu:gemm_batched attention.cu:attention_forward
attention.cu:attention_forward_online_kernel attention.cu:attention_online_smem attention.cu:attention_forward_online
attention.cu:alibi_slope attention.cu:alibi_bias_kernel
attention.cu:flash_forward_kernel attention.cu:flash_forward_hd attention.cu:flash_forward_cuda_cores
attention.cu:FtcSmem attention.cu:flash_tc_load_tile attention.cu:flash_tc_write_rows attention.cu:flash_tc_forward_kernel
attention.cu:flash_tc_forward_hd attention.cu:flash_forward_tensor_cores
attention_backward.cu:softmax_backward_kernel attention_backward.cu:gemm_batched attention_backward.cu:attention_backward
attention_backward.cu:alibi_slope attention_backward.cu:flash_backward_dot_kernel attention_backward.cu:flash_load_rows
attention_backward.cu:flash_backward_kv_kernel attention_backward.cu:flash_backward_q_kernel
attention_backward.cu:flash_backward_smem attention_backward.cu:flash_backward_hd attention_backward.cu:flash_backward_cuda_cores
attention_backward.cu:FtcSmem attention_backward.cu:flash_tc_load_tile attention_backward.cu:flash_tc_write_rows
attention_backward.cu:flash_tc_scores attention_backward.cu:flash_tc_backward_kv_kernel attention_backward.cu:flash_tc_backward_q_kernel
attention_backward.cu:flash_tc_backward_hd attention_backward.cu:flash_backward_tensor_cores
swiglu.cu:swiglu_forward_kernel swiglu.cu:swiglu_backward_kernel
classifier.cu:online_merge classifier.cu:block_online_reduce classifier.cu:classifier_kernel
adamw.cu:adamw_kernel"

extract() {  # extract FILE NAME
    awk -v name="$2" -f extract.awk "$1"
}

fail=0
n=0
for pair in $PAIRS; do
    file=${pair%%:*}
    fn=${pair##*:}
    a=$(extract "$SRC" "$fn")
    b=$(extract "$file" "$fn")
    n=$((n + 1))
    if [ -z "$a" ]; then
        echo "check-v1: $fn not found in train_gpt.cu"
        fail=1
    elif [ -z "$b" ]; then
        echo "check-v1: $fn not found in dev/cuda/$file"
        fail=1
    elif [ "$a" != "$b" ]; then
        echo "check-v1: dev/cuda/$file: $fn differs from train_gpt.cu (< train_gpt.cu, > dev/cuda):"
        diff <(printf '%s\n' "$a") <(printf '%s\n' "$b")
        fail=1
    fi
done
if [ $fail = 0 ]; then
    echo "check-v1: $n functions identical to train_gpt.cu"
fi
exit $fail
