# make            the CPU trainer, the test program, the built-in corpus, and the CUDA
#                 trainers where nvcc exists (bf16 train_gpt and fp32 train_gpt_fp32)
# make test       every test (GPU checks report skipped without a GPU)
# make bench      CPU tokens/s against PyTorch on the same machine
# make cuda       only the CUDA programs (warnings are errors), dev/cuda's kernel variants too
# make kernels-run  validate and benchmark every dev/cuda kernel variant (needs a GPU)
CC = gcc
CFLAGS ?= -O3 -march=native
CFLAGS += -std=c11 -ffp-contract=off -fopenmp -Wall -Wextra -Werror
LDLIBS = -lm
PYTHON ?= python3
HEADERS = $(wildcard llmc/*.h)

NVCC ?= $(shell command -v nvcc 2>/dev/null)
# the GPU's own architecture when one is visible, else Ampere and Hopper
GPU_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d .)
ifneq ($(GPU_CC),)
CUDA_ARCH ?= -gencode arch=compute_$(GPU_CC),code=sm_$(GPU_CC)
else
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
endif
# no --use_fast_math: RoPE needs accurate sincosf at angles of 1e5 radians
NVCC_FLAGS = -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra,-Werror,-ffp-contract=off -Werror all-warnings
CUDA_BINS = train_gpt train_gpt_fp32

.PHONY: all test bench clean data cuda kernels kernels-run
all: train_gpt_cpu test_gpt data $(if $(NVCC),cuda)

train_gpt_cpu: train_gpt_cpu.c $(HEADERS)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

test_gpt: test_gpt.c train_gpt_cpu.c $(HEADERS)
	$(CC) $(CFLAGS) -Wno-unused-function -o $@ $< $(LDLIBS)

cuda: $(CUDA_BINS) kernels
kernels:
	$(MAKE) -C dev/cuda all fp32
kernels-run: kernels
	$(MAKE) -C dev/cuda run run-fp32
train_gpt: train_gpt.cu $(HEADERS)
	$(NVCC) $(NVCC_FLAGS) -o $@ $< -lcublas
train_gpt_fp32: train_gpt.cu $(HEADERS)
	$(NVCC) $(NVCC_FLAGS) -DENABLE_FP32 -o $@ $< -lcublas

# the built-in corpus (no download)
data: data/builtin/train.bin
data/builtin/train.bin: data/builtin_corpus.py
	$(PYTHON) data/builtin_corpus.py

test: train_gpt_cpu test_gpt data $(if $(NVCC),cuda)
	@bash dev/run_tests.sh

bench: train_gpt_cpu data
	@bash dev/bench_cpu.sh

clean:
	rm -f train_gpt_cpu test_gpt $(CUDA_BINS)
	$(MAKE) -C dev/cuda clean
