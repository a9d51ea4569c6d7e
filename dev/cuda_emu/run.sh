#!/usr/bin/env bash
# The kernels of train_gpt.cu run on the CPU (dev/cuda_emu/emu.h), in fp32, against double-
# precision references: flash attention forward and backward, the RMSNorm backward, the
# evaluation's attention kernel, RoPE (the PosAug hook), sinusoidal positions, the
# classifier, the GRU's step kernels, and the small ones (RMSNorm forward, the naive
# attention's softmax and ALiBi passes, SwiGLU, the embedding, the GRU's layout and bias
# kernels, the gradient norm, the loss sum, AdamW); and the host functions around cuBLAS
# (the matmuls, the naive attention, the LM head with the classifier in both variants)
# against emu.h's cuBLAS, their kernel launches rewritten by transform.py. The kernels are
# compiled twice, as each build compiles them
# (floatX = float, and floatX = bf16 with emu.h's bf16, WMMA and mma.cuh's PTX): the bf16 build's
# tensor-core flash attention (it exists in that build only) and the classifier also run
# in bf16. They come from the trainer's own headers, llmc/cuda/*.cuh (nothing is copied or
# cut out), so a change to a kernel is tested here without a GPU. Prints one
# PASS/FAIL line per case and "N passed, N failed, N skipped"; skipped without a C++20 g++.
cd "$(dirname "$0")" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HEADERS=${HEADERS:-../../llmc/cuda}  # HEADERS=folder: another copy of the headers (to see a broken kernel fail)
# the kernels test_kernels.cpp checks (each directly or through the host function that
# launches it): every __global__ of the headers must be here, and have a case there
CHECKED="flash_forward_kernel flash_backward_dot_kernel flash_backward_kv_kernel flash_backward_q_kernel
rmsnorm_backward_kernel_v1 rmsnorm_backward_kernel_v2 rmsnorm_dw_kernel attention_forward_online_kernel rope_kernel_v1 rope_kernel_v2 rope_kernel_v3
sinusoidal_kernel classifier_kernel
gru_step_forward_kernel gru_step_backward_kernel rmsnorm_forward_kernel softmax_forward_kernel softmax_backward_kernel
attn_bias_kernel attn_bias_diag_kernel bias_fn_fill_kernel bias_fn_chunk_kernel bias_fn_reduce_kernel flash_bias_diag_kernel rel_key_scores_kernel
rel_key_rowg_kernel rel_key_dq_kernel rel_key_drk_kernel tpe_keys_kernel tpe_grad_hidden_kernel tpe_grad_w2_kernel tupe_ln_kernel tupe_project_kernel tupe_pair_kernel scale_kernel
tupe_pair_grad_kernel tupe_proj_grad_kernel tupe_du_kernel tupe_dp_kernel tupe_ln_backward_kernel tupe_sums_kernel swiglu_forward_kernel_v1 swiglu_backward_kernel_v1
swiglu_forward_kernel_v2 swiglu_backward_kernel_v2 swiglu_forward_kernel_v3 swiglu_backward_kernel_v3 encoder_forward_kernel scatter_add_rows_kernel
transpose_bt_kernel column_sum_kernel sumsq_kernel loss_sum_kernel adamw_kernel_v1 adamw_kernel_v2 learned_forward_kernel
residual_forward_kernel copy_to_x_kernel flash_tc_forward_kernel_v1 flash_tc_forward_kernel_v2 flash_tc_backward_kv_kernel_v1
flash_tc_backward_q_kernel_v1 flash_tc_backward_kv_kernel_v2 flash_tc_backward_q_kernel_v2"
checked=" $(tr '\n' ' ' <<< "$CHECKED") "
grep -hE '^__global__' "$HEADERS"/*.cuh | sed -E 's/^__global__ void (__launch_bounds__\([A-Z_0-9]*\) )?([A-Za-z_0-9]+)\(.*/\2/' |
while read -r k; do
    case $checked in
    *" $k "*) ;;
    *) echo "FAIL: kernel $k of llmc/cuda has no CPU check (add it to CHECKED in dev/cuda_emu/run.sh and a case to test_kernels.cpp)"
       echo "0 passed, 1 failed, 0 skipped"; exit 1 ;;
    esac
done || exit 1
# every kernel header but the precision and runtime one (test_kernels.cpp has its own),
# inlined and its launches rewritten; compiled inside a namespace per build
for h in "$HEADERS"/*.cuh; do echo "#include \"$(cd "$(dirname "$h")" && pwd)/$(basename "$h")\""; done > "$tmp/kernels.cu"
python3 transform.py --skip cuda_common.cuh --no-includes "$tmp/kernels.cu" > "$tmp/kernels.inc" || exit 1
if ! g++ -std=c++20 -O2 -Wall -Wextra -Werror -Wno-unused-function -Wno-unknown-pragmas -Wno-unused-variable -ffp-contract=off -I"$tmp" -o "$tmp/test" test_kernels.cpp -pthread 2>"$tmp/cc.log"; then
    if grep -qE "barrier: No such file|unrecognized command-line option '-std=c\+\+20'" "$tmp/cc.log"; then
        echo "SKIP: CUDA kernels on the CPU: this g++ has no C++20 <barrier>"
        echo "0 passed, 0 failed, 1 skipped"
        exit 0
    fi
    head -n 30 "$tmp/cc.log"
    echo "FAIL: dev/cuda_emu/test_kernels.cpp does not compile against the kernels of llmc/cuda"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
"$tmp/test"
