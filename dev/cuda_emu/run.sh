#!/usr/bin/env bash
# The kernels of train_gpt.cu run on the CPU (dev/cuda_emu/emu.h), in fp32, against double-
# precision references: flash attention forward and backward, the RMSNorm backward, the
# evaluation's attention kernel, RoPE (the PosAug hook), sinusoidal positions, the
# classifier, the GRU's step kernels, and the small ones (RMSNorm forward, the naive
# attention's softmax and ALiBi passes, SwiGLU, the embedding, the GRU's layout and bias
# kernels, the gradient norm, the loss sum, AdamW); and the host functions around cuBLAS
# (the matmuls, the naive attention) against emu.h's cuBLAS, their kernel launches
# rewritten by transform.py. The kernels are compiled twice, as each build compiles them
# (floatX = float, and floatX = bf16 with emu.h's bf16 and WMMA): the bf16 build's
# tensor-core flash attention (it exists in that build only) and the classifier also run
# in bf16. Their source is cut out of train_gpt.cu by name at each run (nothing is
# copied), so a change to a kernel is tested here without a GPU. Prints one
# PASS/FAIL line per case and "N passed, N failed, N skipped"; skipped without a C++20 g++.
cd "$(dirname "$0")" || exit 1
SRC=${SRC:-../../train_gpt.cu}  # SRC=path: another copy of the trainer (to see a broken kernel fail)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FUNCS="ceil_div warp_sum warp_max block_sum block_max Pack128 load128 store128 alibi_slope flash_forward_kernel flash_backward_dot_kernel flash_load_rows
flash_backward_kv_kernel flash_backward_q_kernel flash_backward_smem rmsnorm_backward_kernel rmsnorm_dw_kernel
attention_forward_online_kernel attention_online_smem attention_forward_online rope_kernel token_position sinusoidal_kernel online_merge block_online_reduce
classifier_kernel sigmoid_f
gru_step_forward_kernel gru_step_backward_kernel rmsnorm_forward_kernel softmax_forward_kernel softmax_backward_kernel
alibi_bias_kernel swiglu_forward_kernel swiglu_backward_kernel encoder_forward_kernel scatter_add_rows_kernel scatter_build scatter_add_rows
transpose_bt_kernel column_sum_kernel sumsq_kernel loss_sum_kernel adamw_kernel
matmul_forward matmul_dweight matmul_backward gemm_batched attention_forward attention_backward learned_forward_kernel
residual_forward_kernel copy_to_x_kernel"
# the bf16 build's tensor-core flash attention (test_kernels.cpp runs these in bf16 only)
TC_FUNCS="FtcSmem flash_tc_load_tile flash_tc_write_rows flash_tc_forward_kernel flash_tc_scores flash_tc_backward_kv_kernel
flash_tc_backward_q_kernel flash_tc_forward_hd flash_tc_backward_hd flash_forward_tensor_cores flash_backward_tensor_cores"
cut_funcs() {  # cut_funcs NAME...: the defines and the functions, launches rewritten
    {
        grep -E '^#define (FLASH_|ATT_|FTC_|XVEC|SCATTER_)' "$SRC"
        grep -E '^#define FLASH_MAX_HD' ../../llmc/config.h
        for fn in "$@"; do
            awk -v name="$fn" -f ../cuda/extract.awk "$SRC"
        done
    } > "$tmp/cut.cu"
    python3 transform.py "$tmp/cut.cu" || exit 1  # launches and dynamic shared memory, as for the trainer
}
cut_funcs $FUNCS > "$tmp/kernels.inc" || exit 1
cut_funcs $TC_FUNCS > "$tmp/kernels_tc.inc" || exit 1
for fn in $FUNCS $TC_FUNCS; do
    grep -qE "[ *]$fn(\(| \{)" "$tmp/kernels.inc" "$tmp/kernels_tc.inc" || { echo "FAIL: $fn not found in train_gpt.cu"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
done
# every kernel of the trainer is checked here: a new one must join FUNCS (and get a case)
for k in $(grep -E '^__global__' "$SRC" | sed -E 's/^__global__ void (__launch_bounds__\([A-Z_0-9]*\) )?([A-Za-z_0-9]+)\(.*/\2/'); do
    case " $(echo $FUNCS $TC_FUNCS) " in
    *" $k "*) ;;
    *) echo "FAIL: kernel $k of train_gpt.cu has no CPU check (add it to FUNCS in dev/cuda_emu/run.sh and a case to test_kernels.cpp)"
       echo "0 passed, 1 failed, 0 skipped"; exit 1 ;;
    esac
done
if ! g++ -std=c++20 -O2 -Wall -Wextra -Werror -Wno-unused-function -Wno-unknown-pragmas -Wno-unused-variable -ffp-contract=off -I"$tmp" -o "$tmp/test" test_kernels.cpp -pthread 2>"$tmp/cc.log"; then
    if grep -qE "barrier: No such file|unrecognized command-line option '-std=c\+\+20'" "$tmp/cc.log"; then
        echo "SKIP: CUDA kernels on the CPU: this g++ has no C++20 <barrier>"
        echo "0 passed, 0 failed, 1 skipped"
        exit 0
    fi
    head -n 30 "$tmp/cc.log"
    echo "FAIL: dev/cuda_emu/test_kernels.cpp does not compile against train_gpt.cu's kernels"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
"$tmp/test"
