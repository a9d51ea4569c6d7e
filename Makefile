# make            the CPU trainer, the test program and the built-in corpus (seconds)
# make test       every test suite (list: dev/README.md; time: README); the first run sets up .venv
# make cuda       the CUDA trainers (bf16 train_gpt, fp32 train_gpt_fp32) and dev/cuda's
#                 kernel variants (about 75 s on 2 cores; needs nvcc)
# WERROR=-Werror  warnings as errors, as make test and CI build (a user's make only warns,
#                 so a newer compiler's new warning does not stop the build)
# make sanitize   the CPU trainer and test_gpt under ASan + UBSan, every test (part of make test)
# make fuzz       every libFuzzer harness in dev/fuzz for FUZZ_SECONDS each (default 60; clang)
# make venv       the project's Python environment: .venv from dev/requirements.txt (numpy,
#                 matplotlib, tokenizers) for the scripts in dev/ and data/ (make test makes it too)
# make bench      CPU tokens/s against PyTorch on the same machine
# make reference  regenerate the PyTorch reference files test_gpt compares against (dev/reference_*.bin:
#                 every encoding of dev/model_torch.py's ENCODINGS, QK-norm, the GRU), with PyTorch in
#                 .venv-bench (made once, shared with make bench; a CPU wheel is enough; CI never needs it)
# make profile    where the tiny model's training step goes on this CPU (perf)
# make kernels-run  validate and benchmark every dev/cuda kernel variant (needs a GPU)
CC = gcc
# $(call cc_takes,FLAG): FLAG when the compiler takes it without a warning, else nothing
cc_takes = $(shell echo 'int main(void) { return 0; }' | $(CC) $(1) -Werror -x c -c -o /dev/null - 2>/dev/null && echo $(1))
# OpenMP where the compiler has it; without it (Apple's clang, for one) the CPU trainer is
# built for one thread
OPENMP := $(call cc_takes,-fopenmp)
ifeq ($(OPENMP),)
$(warning $(CC) does not take -fopenmp: the CPU trainer is built for one thread)
endif
# unless CFLAGS is given: -O3 and this CPU's instruction set, -march=native, or -mcpu=native
# where that is refused (clang before 15 on ARM, Apple's included), or the compiler's default
ifeq ($(origin CFLAGS),undefined)
NATIVE := $(or $(call cc_takes,-march=native),$(call cc_takes,-mcpu=native))
ifeq ($(NATIVE),)
$(warning $(CC) takes neither -march=native nor -mcpu=native: the CPU trainer is built for its default instruction set)
endif
CFLAGS = -O3 $(NATIVE)
endif
WERROR ?=
# kept with a CFLAGS of your own (given to make, or set by an environment such as conda's)
override CFLAGS += -std=c11 -ffp-contract=off $(OPENMP) -Wall -Wextra $(WERROR)
LDLIBS = -lm
PYTHON ?= python3
HEADERS = $(wildcard llmc/*.h)
CUDA_HEADERS = $(wildcard llmc/cuda/*.cuh)

NVCC ?= $(shell command -v nvcc 2>/dev/null)
# the GPU's own architecture when one is visible, else Ampere and Hopper
GPU_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d .)
ifneq ($(GPU_CC),)
CUDA_ARCH ?= -gencode arch=compute_$(GPU_CC),code=sm_$(GPU_CC)
else
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
endif
# no --use_fast_math: RoPE needs accurate sincosf at angles of 1e5 radians
NVCC_FLAGS = -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra,-ffp-contract=off $(if $(WERROR),-Xcompiler -Werror -Werror all-warnings)
CUDA_BINS = train_gpt train_gpt_fp32

.PHONY: all test bench profile clean data cuda kernels kernels-run sanitize fuzz venv venv-bench reference FORCE
all: train_gpt_cpu test_gpt data

# the flags the binaries were built with: a binary is rebuilt when they change (WERROR, CFLAGS)
.flags_cc: FORCE
	@echo '$(CC) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS)' > $@
.flags_nvcc: FORCE
	@echo '$(NVCC) $(NVCC_FLAGS)' | cmp -s - $@ || echo '$(NVCC) $(NVCC_FLAGS)' > $@

train_gpt_cpu: train_gpt_cpu.c $(HEADERS) .flags_cc
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

test_gpt: test_gpt.c train_gpt_cpu.c $(HEADERS) .flags_cc
	$(CC) $(CFLAGS) -Wno-unused-function -o $@ $< $(LDLIBS)

# AddressSanitizer + UndefinedBehaviorSanitizer builds (dev/sanitize.sh runs them)
SAN_FLAGS = $(filter-out -O%,$(CFLAGS)) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
train_gpt_cpu_san: train_gpt_cpu.c $(HEADERS) .flags_cc
	$(CC) $(SAN_FLAGS) -o $@ $< $(LDLIBS)
test_gpt_san: test_gpt.c train_gpt_cpu.c $(HEADERS) .flags_cc
	$(CC) $(SAN_FLAGS) -Wno-unused-function -o $@ $< $(LDLIBS)
sanitize: data
	@bash dev/sanitize.sh
fuzz:
	@bash dev/fuzz/run.sh $(or $(FUZZ_SECONDS),60)

cuda: $(CUDA_BINS) kernels
kernels:
	$(MAKE) -C dev/cuda all fp32
kernels-run: kernels
	$(MAKE) -C dev/cuda run run-fp32
train_gpt: train_gpt.cu $(HEADERS) $(CUDA_HEADERS) .flags_nvcc
	$(NVCC) $(NVCC_FLAGS) -o $@ $< -lcublas
train_gpt_fp32: train_gpt.cu $(HEADERS) $(CUDA_HEADERS) .flags_nvcc
	$(NVCC) $(NVCC_FLAGS) -DENABLE_FP32 -o $@ $< -lcublas

# the built-in corpus (no download)
data: data/builtin/train.bin
data/builtin/train.bin: data/builtin_corpus.py
	$(PYTHON) data/builtin_corpus.py

venv: .venv/requirements.txt
.venv/requirements.txt: dev/requirements.txt
	rm -rf .venv
	$(PYTHON) -m venv .venv
	.venv/bin/python -m pip install --quiet --disable-pip-version-check -r dev/requirements.txt
	cp dev/requirements.txt .venv/requirements.txt

# PyTorch for make bench and make reference (dev/requirements-bench.txt): the CPU wheel from
# download.pytorch.org where reachable, else PyPI's; remade when the requirements change
venv-bench: .venv-bench/requirements.txt
.venv-bench/requirements.txt: dev/requirements-bench.txt
	rm -rf .venv-bench
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/python -m pip install --quiet --disable-pip-version-check -r dev/requirements-bench.txt \
		--index-url https://download.pytorch.org/whl/cpu 2>/dev/null || \
		.venv-bench/bin/python -m pip install --quiet --disable-pip-version-check -r dev/requirements-bench.txt
	cp dev/requirements-bench.txt .venv-bench/requirements.txt

reference: venv-bench
	.venv-bench/bin/python dev/pytorch_reference.py --all
	.venv-bench/bin/python dev/gru_reference.py

# the project checks itself with warnings as errors
test: export WERROR = -Werror
test: train_gpt_cpu test_gpt data
	@bash dev/run_tests.sh

bench: train_gpt_cpu data
	@bash dev/bench_cpu.sh

profile: train_gpt_cpu data
	@bash dev/profile_cpu.sh

clean:
	rm -f train_gpt_cpu test_gpt train_gpt_cpu_san test_gpt_san $(CUDA_BINS) .flags_cc .flags_nvcc
	$(MAKE) -C dev/cuda clean
