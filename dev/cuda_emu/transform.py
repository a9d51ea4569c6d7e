"""train_gpt.cu (or the kernel headers of llmc/cuda/) as C++ for the CPU emulation
(trainer.sh, run.sh):

    python3 dev/cuda_emu/transform.py train_gpt.cu > train_gpt_emu.cpp
    python3 dev/cuda_emu/transform.py --skip cuda_common.cuh --no-includes kernels.cu

Each `#include "X.cuh"` is replaced by the header's own text, once (its #pragma once
dropped), so the launches in llmc/cuda/ are rewritten too; --skip drops the named headers
(the emulation brings its own precision and runtime), --no-includes every other #include
(run.sh compiles the result inside namespaces).

Every launch `kernel<<<grid, block[, smem]>>>(args)` becomes
`emu_launch(dim3(grid), dim3(block), smem, [&] { kernel(args); }, "kernel")`, or emu_launch_serial
(the threads one after another, much faster) for a kernel with no barrier and no warp
operation (shuffles, WMMA, mma.cuh's instructions), in its body or in the __device__ functions it calls;
`extern __shared__ [__align__(N)] float x[];` (or unsigned char) becomes a pointer to the
emulator's buffer.
The kernels launched through LAUNCH_ELEMS are elementwise, LAUNCH_ROWS's are RMSNorm's."""
import re
import sys

SYNC = r"__syncthreads|__syncwarp|__shfl|wmma::|mma_bf16|ldmatrix|cp_async"  # and every __device__ function that reaches one
KERNEL = re.compile(r"^__global__ void (?:__launch_bounds__\([A-Z_0-9]*\) )?([A-Za-z_0-9]+)\(", re.M)
DEVICE = re.compile(r"^__device__ [^(;]*?([A-Za-z_0-9]+)\(", re.M)


def body(src, m):
    """The text of the function whose signature match m is, up to its closing line."""
    return src[m.end():src.find("\n}\n", m.end())]


def split_top(s):
    """s split at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()]


def close_paren(s, p):
    """The index of the parenthesis closing s[p] == '('."""
    depth = 0
    for q in range(p, len(s)):
        depth += s[q] == "("
        depth -= s[q] == ")"
        if depth == 0:
            return q
    sys.exit("transform.py: unbalanced parentheses at %d" % p)


def callee_start(s, j):
    """Where the kernel name (with its template arguments) ending at s[j] starts."""
    k = j
    if s[k - 1] == ">":  # template arguments
        depth = 0
        while True:
            k -= 1
            depth += s[k] == ">"
            depth -= s[k] == "<"
            if s[k] == "<" and depth == 0:
                break
    return re.search(r"[A-Za-z_][A-Za-z_0-9]*$", s[:k]).start()


def inline_headers(path, skip, seen):
    """The text of path with each #include of a .cuh file replaced by that file's text
    (found beside the including file), each header once; headers named in skip dropped."""
    import os
    with open(path) as f:
        lines = f.read().split("\n")
    out = []
    for line in lines:
        m = re.match(r'#include "([^"]+\.cuh)"', line)
        if line.strip() == "#pragma once":
            continue
        if not m:
            q = re.match(r'#include "([^"]+)"', line)  # another header: found from anywhere
            near = q and os.path.join(os.path.dirname(path), q.group(1))
            out.append('#include "%s"' % os.path.abspath(near) if near and os.path.exists(near) else line)
            continue
        inc = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
        if inc in seen or os.path.basename(inc) in skip:
            continue
        seen.add(inc)
        out.append(inline_headers(inc, skip, seen))
    return "\n".join(out)


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Rewrite CUDA source (train_gpt.cu, or the kernel headers of llmc/cuda) "
                                 "as C++ for the CPU emulation, to stdout: kernel launches become emu_launch calls.")
    ap.add_argument("file", help="the .cu file")
    ap.add_argument("--skip", action="append", default=[], help="a header not to inline (its name), repeatable")
    ap.add_argument("--no-includes", action="store_true", help="drop every #include left after inlining")
    args = ap.parse_args()
    try:
        src = inline_headers(args.file, set(args.skip), set())
    except (OSError, UnicodeDecodeError) as e:
        sys.exit("transform.py: error: %s" % e)
    if args.no_includes:
        src = re.sub(r"(?m)^#include .*$", "", src)
    device = {m.group(1): body(src, m) for m in DEVICE.finditer(src)}
    syncing = set()  # __device__ functions that synchronize, directly or through another one
    while True:
        sync = "|".join([SYNC] + [r"\b%s\(" % f for f in sorted(syncing)])
        more = {f for f, b in device.items() if f not in syncing and re.search(sync, b)}
        if not more:
            break
        syncing |= more
    threaded, defined = set(), set()  # kernels whose threads must run together; kernels defined here
    for m in KERNEL.finditer(src):
        defined.add(m.group(1))
        if re.search(sync, body(src, m)):
            threaded.add(m.group(1))
    out, i = [], 0
    while (j := src.find("<<<", i)) >= 0:
        start, e = callee_start(src, j), src.find(">>>", j)
        cfg, q = split_top(src[j + 3:e]), close_paren(src, e + 3)
        callee = src[start:j]
        name = re.match(r"[A-Za-z_0-9]+", callee).group(0)
        # a kernel defined elsewhere (another cut of run.sh) runs threaded: always correct
        together = "(rows)" in cfg[0] if name == "kernel" else name in threaded or name not in defined
        out.append(src[i:start])
        label = "#kernel" if name == "kernel" else '"%s"' % name  # in LAUNCH_ROWS/ELEMS: the macro's argument
        out.append("%s(dim3(%s), dim3(%s), %s, [&] { %s(%s); }, %s)" % ("emu_launch" if together else "emu_launch_serial",
                   cfg[0], cfg[1], cfg[2] if len(cfg) > 2 else "0", callee, src[e + 4:q], label))
        i = q + 1
    out.append(src[i:])
    sys.stdout.write(re.sub(r"extern __shared__ (?:__align__\(\d+\) )?(float|unsigned char) ([a-z_]+)\[\];",
                            r"\1 *\2 = (\1 *)emu_dynamic_smem;", "".join(out)))


if __name__ == "__main__":
    main()
