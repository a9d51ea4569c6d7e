"""Crash safety of the trainer's files: checkpoints, log.jsonl and evaluation output.

    python3 dev/test_crash_safety.py [--trainer ./train_gpt_cpu] [--seed 1] [--trials 24]

Needs `make train_gpt_cpu data`. Runs test_gpt.c's SMALL model (--ckpt_every 1, 500 steps,
about 2 s a run on 2 cores) and checks:
  - SIGKILL at seeded random moments (some while checkpoint.bin.tmp exists): the run resumes
    from its checkpoint, or reruns when it has none, to a final checkpoint and loss column
    identical to an uninterrupted run's, with no checkpoint.bin.tmp left;
  - a save into a full location (a file-size limit, and a small tmpfs where mounting is
    permitted): exit 1, an `error:` line naming the checkpoint, the previous checkpoint
    unchanged and resumable, no checkpoint.bin.tmp left;
  - evaluation output and log.jsonl onto a full location: a failure naming the file;
  - a stale checkpoint.bin.tmp is removed;
  - SIGINT: the step ends, a checkpoint is saved, exit 130 naming --resume, and --resume
    alone ends bit-identical to an uninterrupted run; a second SIGINT stops at once;
  - output reaches a pipe as it is printed: step lines (line-buffered) and --generate's tokens.
Everything is written under one temporary directory, deleted at the end. Prints
PASS/FAIL/SKIP per check and ends with "N passed, N failed, N skipped"; exits 1 if any
check failed. Takes about 1.5 minutes on 2 idle cores; far longer while other processes
compete for them (the trainer's OpenMP threads spin-wait for each other).
"""
import argparse
import hashlib
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# test_gpt.c's SMALL without its --steps
SMALL = ("--n_embd 32 --n_layer 2 --n_head 4 --n_kv_head 2 --ffn_hidden 64 --seq_len 32 "
         "--batch_size 2 --total_batch 4 --warmup 2 --val_every 3 --eval_len 0 --threads 2 "
         "--pos posaug --indist_start 8").split()
STEPS = 500
EVAL = "--eval_len 96 --eval_n 2 --gain_window 16".split()
TIMEOUT = 600  # seconds for one trainer run: room for a sanitizer build on busy cores

TESTS = []
OPT = None
TMP = None
_ref = {}


class Skip(Exception):
    pass


def test(fn):
    TESTS.append(fn)
    return fn


def args(out, steps=STEPS, ckpt_every=1, *extra):
    return SMALL + ["--steps", str(steps), "--ckpt_every", str(ckpt_every), "--out_dir", out] + list(extra)


def limit_fsize(nbytes):
    """preexec_fn: writes past nbytes fail with EFBIG instead of raising SIGXFSZ."""
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return f


def run(argv, fsize=None):
    return subprocess.run([OPT.trainer] + argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=limit_fsize(fsize) if fsize else None)


def spawn(argv, out_file):
    with open(out_file, "w") as f:
        return subprocess.Popen([OPT.trainer] + argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)


def fresh_dir(name):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    return d


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def losses(log_path):
    """The (step, loss) column of a log.jsonl, as text (bit-exact comparison)."""
    with open(log_path) as f:
        return re.findall(r'"step": (\d+), "loss": ([^,}]+)', f.read())


def log_lines(log_path):
    try:
        with open(log_path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def tmp_files(out):
    return sorted(n for n in os.listdir(out) if n.endswith(".tmp"))


def errors(r):
    return [l for l in r.stderr.splitlines() if l.startswith("error:")]


def tail(r):
    lines = (r.stderr or r.stdout).strip().splitlines()
    return lines[-1] if lines else "(no output)"


def wait_until(cond, proc, deadline=TIMEOUT, pause=0.0005):
    """Polls cond() until true (returns True) or proc exits (returns False)."""
    t_end = time.monotonic() + deadline
    while not cond():
        if proc.poll() is not None or time.monotonic() > t_end:
            return False
        time.sleep(pause)
    return True


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def reference():
    """The uninterrupted run: its folder, final checkpoint hash, loss column, wall time and
    the time until its first checkpoint."""
    if not _ref:
        out = fresh_dir("reference")
        ckpt = os.path.join(out, "checkpoint.bin")
        t0 = time.monotonic()
        p = spawn(args(out), os.path.join(TMP, "reference.txt"))
        wait_until(lambda: os.path.exists(ckpt), p)
        t_first = time.monotonic() - t0
        p.wait(timeout=TIMEOUT)
        wall = time.monotonic() - t0
        if p.returncode != 0 or not os.path.exists(ckpt):
            with open(os.path.join(TMP, "reference.txt")) as f:
                raise AssertionError("reference run failed (exit %d): %s" % (p.returncode, f.read()[-500:]))
        _ref.update(dir=out, ckpt=ckpt, sha=sha(ckpt), size=os.path.getsize(ckpt),
                    losses=losses(os.path.join(out, "log.jsonl")), wall=wall, t_first=t_first)
        if len(_ref["losses"]) != STEPS:
            raise AssertionError("reference log has %d steps, expected %d" % (len(_ref["losses"]), STEPS))
    return _ref


def matches_reference(out):
    """Problems with a finished run folder against the reference run (empty: none)."""
    ref, bad = reference(), []
    ckpt, tmp = os.path.join(out, "checkpoint.bin"), os.path.join(out, "checkpoint.bin.tmp")
    if not os.path.exists(ckpt):
        bad.append("no final checkpoint.bin")
    elif sha(ckpt) != ref["sha"]:
        bad.append("final checkpoint.bin differs from the reference's")
    if losses(os.path.join(out, "log.jsonl")) != ref["losses"]:
        bad.append("loss column differs from the reference's")
    if os.path.exists(tmp):
        bad.append("checkpoint.bin.tmp left (%d bytes)" % os.path.getsize(tmp))
    return bad


# ---- 1. SIGKILL during frequent checkpoints ----------------------------------------------
def kill_trial(i, rng, ref):
    """One trial: start, SIGKILL, then resume (or rerun without a checkpoint) and compare
    with the reference. Returns a dict: tmp, ckpt (present at the kill), outcome, step
    (resumed from), bad (problems)."""
    out = fresh_dir("trial%02d" % i)
    ckpt, tmp, log = (os.path.join(out, n) for n in ("checkpoint.bin", "checkpoint.bin.tmp", "log.jsonl"))
    # every 12th trial dies during the first save, every 12th (offset 6) at a random moment
    # of the startup, every 3rd while some later .tmp exists, the others at a random point of
    # a random step
    mode = ("first save" if i % 12 == 0 else "startup" if i % 6 == 0 else "save" if i % 3 == 2 else "step")
    k, frac = rng.randrange(1, STEPS), rng.random()
    p = spawn(args(out), os.path.join(TMP, "trial%02d.txt" % i))
    if mode == "first save":
        wait_until(lambda: os.path.exists(tmp), p, pause=0.0002)
    elif mode == "startup":
        time.sleep(frac * ref["t_first"])
    elif wait_until(lambda: log_lines(log) >= k, p, pause=0.001):
        if mode == "step":
            time.sleep(frac * ref["wall"] / STEPS)
        else:
            wait_until(lambda: os.path.exists(tmp), p, pause=0.0002)
    kill(p)
    finished = p.returncode != -signal.SIGKILL
    t = dict(tmp=os.path.exists(tmp), ckpt=os.path.exists(ckpt), step=None)
    if finished:
        t["outcome"] = "finished before the kill"
        t["bad"] = ["exited %d before the kill" % p.returncode] if p.returncode else matches_reference(out)
        return t
    if t["ckpt"]:
        r = run(args(out) + ["--resume", ckpt])
        m = re.search(r"\(step (\d+)", r.stdout)
        t["step"] = int(m.group(1)) if m else None
        t["outcome"] = "resumed from step %s" % (t["step"] if m else "?")
    else:  # a killed run's log stays: the rerun replaces it, as asked
        r = run(args(out) + ["--overwrite"])
        t["outcome"] = "rerun (no checkpoint)"
    t["bad"] = ["exit %d: %s" % (r.returncode, tail(r))] if r.returncode else matches_reference(out)
    return t


@test
def sigkill_during_checkpoints():
    ref = reference()
    rng = random.Random(OPT.seed)
    trials = [kill_trial(i, rng, ref) for i in range(OPT.trials)]
    killed = [t for t in trials if t["outcome"] != "finished before the kill"]
    steps = [t["step"] for t in trials if t["step"] is not None]
    resumed = sum(t["outcome"].startswith("resumed") for t in trials)
    summary = ("%d trials, seed %d: %d killed during a save, %d before the first checkpoint (rerun), %d "
               "finished before the kill, %d resumed%s" % (
                   len(trials), OPT.seed, sum(t["tmp"] for t in killed), sum(not t["ckpt"] for t in killed),
                   len(trials) - len(killed), resumed,
                   " (from steps %d..%d)" % (min(steps), max(steps)) if steps else ""))
    failures = ["trial %d (%s%s): %s" % (i, t["outcome"], ", .tmp at the kill" if t["tmp"] else "", "; ".join(t["bad"]))
                for i, t in enumerate(trials) if t["bad"]]
    if failures:
        raise AssertionError("%s; %d failed: %s" % (summary, len(failures), " | ".join(failures[:4])))
    return summary + "; all end identical to the uninterrupted run, no .tmp left"


# ---- 2. a save into a full location ---------------------------------------------------------
def full_save(out, fsize, resume_dir):
    """--stop_after leaves a good checkpoint in out; --resume it where the next save cannot
    fit (fsize: a file-size limit; None: out is already too small); then resume it without
    the limit from resume_dir (a copy of out, or out itself)."""
    k = STEPS // 10
    ckpt, tmp = os.path.join(out, "checkpoint.bin"), os.path.join(out, "checkpoint.bin.tmp")
    r = run(args(out, STEPS, 0, "--stop_after", str(k)))
    if r.returncode != 0 or not os.path.exists(ckpt):
        raise AssertionError("--stop_after %d run failed (exit %d): %s" % (k, r.returncode, tail(r)))
    before = sha(ckpt)
    r = run(args(out) + ["--resume", ckpt], fsize)
    bad = []
    if r.returncode != 1:
        bad.append("failed save: exit %d, expected 1" % r.returncode)
    if not [e for e in errors(r) if "checkpoint.bin" in e]:
        bad.append("no error: line naming the checkpoint (stderr: %r)" % r.stderr.strip()[-300:])
    if sha(ckpt) != before:
        bad.append("checkpoint.bin changed")
    if os.path.exists(tmp):
        bad.append("checkpoint.bin.tmp left (%d bytes)" % os.path.getsize(tmp))
    observed = "exit %d, %s" % (r.returncode, errors(r)[-1] if errors(r) else "no error: line")
    if resume_dir != out:
        for name in ("checkpoint.bin", "log.jsonl"):
            shutil.copy(os.path.join(out, name), resume_dir)
    r = run(args(resume_dir) + ["--resume", os.path.join(resume_dir, "checkpoint.bin")])
    if r.returncode != 0:
        bad.append("resuming the previous checkpoint without the limit: exit %d: %s" % (r.returncode, tail(r)))
    else:
        bad += ["after resuming without the limit: " + b for b in matches_reference(resume_dir)]
    if bad:
        raise AssertionError("%s (observed: %s)" % ("; ".join(bad), observed))
    return observed + "; previous checkpoint intact and resumed to the reference's end"


@test
def full_save_fsize_limit():
    limit = reference()["size"] // 2
    out = fresh_dir("full_fsize")
    return "limit %d bytes: %s" % (limit, full_save(out, limit, out))


@test
def full_save_tmpfs():
    ref = reference()
    mnt = fresh_dir("tmpfs")
    # room for one checkpoint and the log, not for a second copy of the checkpoint
    size = (ref["size"] + 65536 + 4095) // 4096 * 4096
    try:
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", mnt],
                           capture_output=True, text=True)
    except OSError as e:
        raise Skip("cannot run mount: %s" % e)
    if m.returncode != 0:
        raise Skip("mounting a tmpfs is not permitted here: %s" % (m.stderr.strip() or "exit %d" % m.returncode))
    try:
        return "tmpfs of %d bytes: %s" % (size, full_save(mnt, None, fresh_dir("full_tmpfs_copy")))
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


# ---- 3. evaluation output onto a full location ---------------------------------------------
@test
def eval_output_full():
    ckpt = reference()["ckpt"]
    out = fresh_dir("eval_ok")
    r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out])
    csv = os.path.join(out, "eval_L96.csv")
    if r.returncode != 0 or not os.path.exists(csv):
        raise AssertionError("unlimited --eval_only failed (exit %d): %s" % (r.returncode, tail(r)))
    limit = os.path.getsize(csv) // 2
    out = fresh_dir("eval_full")
    r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out], limit)
    wrote = [l for l in r.stdout.splitlines() if l.startswith("wrote ")]
    observed = "limit %d bytes: exit %d, %s%s" % (limit, r.returncode, errors(r)[-1] if errors(r) else "no error: line",
                                                  ", stdout %r" % wrote[0] if wrote else "")
    bad = []
    if r.returncode == 0:
        bad.append("exit 0")
    if not [e for e in errors(r) if "eval_L96.csv" in e]:
        bad.append("no error: line naming eval_L96.csv")
    if wrote:
        bad.append("claims success")
    if tmp_files(out):
        bad.append("left %s" % ", ".join(tmp_files(out)))
    if bad:
        raise AssertionError("%s (observed: %s)" % ("; ".join(bad), observed))
    return observed


def eval_set(out):
    """The evaluation set eval_L96 in out: {file: sha256} of each file there."""
    return {n: sha(os.path.join(out, n)) for n in sorted(os.listdir(out)) if n.startswith("eval_L96") and not n.endswith(".tmp")}


@test
def eval_interrupted_keeps_the_old_set():
    """SIGINT in the middle of an evaluation (its CSV written, its passkey running) that would
    replace the folder's set: the old CSV, JSON and passkey CSV stay as they were, together;
    the next run in the folder removes the interrupted one's .tmp files."""
    ckpt = reference()["ckpt"]
    out = fresh_dir("eval_set")
    r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--passkey_lengths", "256"])
    old = eval_set(out)
    if r.returncode != 0 or sorted(old) != ["eval_L96.csv", "eval_L96.json", "eval_L96_passkey.csv"]:
        raise AssertionError("the first evaluation failed (exit %d): %s %s" % (r.returncode, sorted(old), tail(r)))
    p = piped(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--overwrite", "--passkey_lengths", "1024"])
    if read_until(p, r"^eval eval_L96 ") is None:
        raise AssertionError("the second evaluation ended before its loss line (exit %s)" % p.wait())
    # the CSV is written just after that line (microseconds): interrupt once it is held, during
    # the passkey, not in between (a race the signal could win or lose)
    held, t0 = os.path.join(out, "eval_L96.csv.tmp"), time.time()
    while not os.path.exists(held) and p.poll() is None and time.time() - t0 < 60:
        time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=TIMEOUT)
    left = tmp_files(out)
    bad = []
    if eval_set(out) != old:
        bad.append("the set changed: %s" % sorted(eval_set(out)))
    if not left:
        bad.append("no .tmp: the CSV was not held for the set's commit")
    r = run(SMALL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--eval_len", "64", "--eval_n", "1",
                     "--eval_tag", "other"])
    if r.returncode != 0 or tmp_files(out) or eval_set(out) != old or "left by an interrupted run" not in r.stdout:
        bad.append("the next run (exit %d) left %s, set %s" % (r.returncode, tmp_files(out), sorted(eval_set(out))))
    if bad:
        raise AssertionError("; ".join(bad))
    return "SIGINT left %s beside the old set; the next run removed it" % ", ".join(os.path.basename(t) for t in left)


@test
def eval_commit_journal_finished():
    """A run killed while its set's files were being renamed (the journal written, the CSV
    renamed, the JSON still a .tmp): the next run in the folder finishes the commit (the new
    CSV and JSON, the old passkey CSV, which the new set lacks, removed; the journal gone)."""
    ckpt = reference()["ckpt"]
    out = fresh_dir("eval_journal")
    r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--passkey_lengths", "256"])
    if r.returncode != 0:
        raise AssertionError("the evaluation failed (exit %d): %s" % (r.returncode, tail(r)))
    with open(os.path.join(out, "eval_L96.csv"), "w") as f:
        f.write("position,loss\n0,1.0\n")  # the new set's CSV, renamed already
    with open(os.path.join(out, "eval_L96.json.tmp"), "w") as f:
        f.write('{"tag": "eval_L96", "new": 1}\n')
    with open(os.path.join(out, "eval_L96.commit"), "w") as f:
        f.write("eval_L96.csv\neval_L96.json\nend 2\n")
    r = run(SMALL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--eval_len", "64", "--eval_n", "1",
                     "--eval_tag", "other"])
    names = sorted(n for n in os.listdir(out) if n.startswith("eval_L96"))
    with open(os.path.join(out, "eval_L96.json")) as f:
        js = f.read()
    if r.returncode != 0 or names != ["eval_L96.csv", "eval_L96.json"] or '"new": 1' not in js or "finishing it" not in r.stdout:
        raise AssertionError("exit %d, %s, json %r: %s" % (r.returncode, names, js[:60], tail(r)))
    return "the next run finished the commit: %s" % ", ".join(names)


def set_of(out):
    """{file: sha256} of the files of eval_L96 in out, its journal and .tmp files included."""
    return {n: sha(os.path.join(out, n)) for n in sorted(os.listdir(out)) if n.startswith("eval_L96")}


@test
def eval_journal_not_whole_is_left_alone():
    """A <tag>.commit that is not a whole journal (empty; cut before its end line; naming a file
    not of the tag's set; a whole one naming a file that is nowhere) beside a complete
    evaluation: the next run in the folder touches nothing (the CSV, JSON, journal and the
    set's .tmp stay), says so, and an evaluation under that tag is refused before it runs."""
    ckpt = reference()["ckpt"]
    out = fresh_dir("eval_journal_broken")
    r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out])
    if r.returncode != 0:
        raise AssertionError("the evaluation failed (exit %d): %s" % (r.returncode, tail(r)))
    with open(os.path.join(out, "eval_L96.json.tmp"), "w") as f:
        f.write('{"tag": "eval_L96", "new": 1}\n')
    bad = []
    for i, journal in enumerate(("", "eval_L96.csv\n", "eval_L96.csv\neval_L96.json\n", "notes.txt\nend 1\n",
                                 "eval_L96_ruler.csv\neval_L96.json\nend 2\n")):
        with open(os.path.join(out, "eval_L96.commit"), "w") as f:
            f.write(journal)
        before = set_of(out)
        r = run(SMALL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--eval_len", "64", "--eval_n", "1",
                         "--eval_tag", "other%d" % i])
        if r.returncode != 0 or set_of(out) != before or "is not a whole journal" not in r.stdout or "finishing" in r.stdout:
            bad.append("journal %r: exit %d, changed %s: %s" % (journal, r.returncode,
                       sorted(set(before.items()) ^ set(set_of(out).items())), tail(r)))
        r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out])
        if r.returncode != 1 or "would replace it" not in r.stderr or set_of(out) != before:
            bad.append("journal %r: the evaluation of its tag was not refused (exit %d): %s" % (journal, r.returncode, tail(r)))
    if bad:
        raise AssertionError("; ".join(bad))
    return "5 journals (empty, cut, cut at a name, another file's, a file that is nowhere) left alone, the set untouched"


@test
def user_tmp_files_untouched():
    """A user's own files ending in .tmp in a run folder (results.csv.tmp, notes.json.tmp, and one
    named like a set file of a tag with no evaluation in the folder) are never removed."""
    ckpt = reference()["ckpt"]
    out = fresh_dir("user_tmp")
    r = run(SMALL + EVAL + ["--eval_only", "--resume", ckpt, "--out_dir", out])
    mine = ["results.csv.tmp", "notes.json.tmp", "eval_L512.csv.tmp"]
    for n in mine:
        with open(os.path.join(out, n), "w") as f:
            f.write("mine\n")
    r2 = run(SMALL + ["--eval_only", "--resume", ckpt, "--out_dir", out, "--eval_len", "64", "--eval_n", "1",
                      "--eval_tag", "other"])
    left = [n for n in mine if os.path.exists(os.path.join(out, n))]
    if r.returncode != 0 or r2.returncode != 0 or left != mine or "left by an interrupted run" in r2.stdout:
        raise AssertionError("exit %d %d, left %s: %s" % (r.returncode, r2.returncode, left, tail(r2)))
    return "%s kept" % ", ".join(mine)


# ---- 4. log.jsonl onto a full location --------------------------------------------------------
@test
def log_full():
    limit = 16384  # the log passes it near step 120; the only checkpoint is at the end
    out = fresh_dir("log_full")
    r = run(args(out, STEPS, 0), limit)
    observed = "limit %d bytes: exit %d, %s" % (limit, r.returncode, errors(r)[-1] if errors(r) else "no error: line")
    bad = []
    if r.returncode != 1:
        bad.append("exit %d, expected 1" % r.returncode)
    if not [e for e in errors(r) if "log.jsonl" in e]:
        bad.append("no error: line naming log.jsonl")
    if tmp_files(out):
        bad.append("left %s" % ", ".join(tmp_files(out)))
    if bad:
        raise AssertionError("%s (observed: %s)" % ("; ".join(bad), observed))
    return observed


# ---- 5. a stale temporary file ---------------------------------------------------------------
def plant_junk(out):
    tmp = os.path.join(out, "checkpoint.bin.tmp")
    with open(tmp, "wb") as f:
        f.write(random.Random(OPT.seed).randbytes(5000))
    return tmp


@test
def stale_tmp_fresh_run():
    out = fresh_dir("stale_fresh")
    tmp = plant_junk(out)
    r = run(args(out, 20))
    if r.returncode != 0:
        raise AssertionError("run failed (exit %d): %s" % (r.returncode, tail(r)))
    if os.path.exists(tmp):
        raise AssertionError("checkpoint.bin.tmp still there after the run")
    return "gone after a 20-step run"


@test
def stale_tmp_resume():
    out = fresh_dir("stale_resume")
    r = run(args(out, 20, 1, "--stop_after", "10"))
    if r.returncode != 0:
        raise AssertionError("--stop_after run failed (exit %d): %s" % (r.returncode, tail(r)))
    tmp = plant_junk(out)
    r = run(args(out, 20) + ["--resume", os.path.join(out, "checkpoint.bin")])
    if r.returncode != 0:
        raise AssertionError("--resume failed (exit %d): %s" % (r.returncode, tail(r)))
    if os.path.exists(tmp):
        raise AssertionError("checkpoint.bin.tmp still there after the resumed run")
    return "gone after resuming steps 11..20"


@test
def stale_tmp_removed_at_start():
    """With --ckpt_every 0 the only save is at the end: a stale .tmp must already be gone
    once training has logged a step (a fresh run and a --resume)."""
    bad = []
    out = fresh_dir("stale_start_fresh")
    tmp = plant_junk(out)
    p = spawn(args(out, STEPS, 0), os.path.join(TMP, "stale_start_fresh.txt"))
    started = wait_until(lambda: log_lines(os.path.join(out, "log.jsonl")) >= 1, p)
    if not started:
        bad.append("fresh run: ended (exit %s) before logging a step" % p.poll())
    elif os.path.exists(tmp):
        bad.append("fresh run: still there after step 1")
    kill(p)

    out = fresh_dir("stale_start_resume")
    r = run(args(out, STEPS, 0, "--stop_after", "10"))
    if r.returncode != 0:
        raise AssertionError("--stop_after run failed (exit %d): %s" % (r.returncode, tail(r)))
    tmp = plant_junk(out)
    p = spawn(args(out, STEPS, 0, "--resume", os.path.join(out, "checkpoint.bin")),
              os.path.join(TMP, "stale_start_resume.txt"))
    started = wait_until(lambda: log_lines(os.path.join(out, "log.jsonl")) >= 11, p)
    if not started:
        bad.append("--resume: ended (exit %s) before logging step 11" % p.poll())
    elif os.path.exists(tmp):
        bad.append("--resume: still there after step 11")
    kill(p)
    if bad:
        raise AssertionError("; ".join(bad))
    return "gone before the first step of a fresh run and of a --resume"


# ---- 6. a graceful stop, and output that reaches a pipe as it is printed -----------------
# The default tiny model (about 0.1 s a step on 2 cores): long enough steps that a signal
# sent after reading a step line lands in the next few steps, whatever the machine's load.
TINY = ["--steps", "40", "--eval_len", "0", "--val_every", "0", "--threads", "2"]


def default_sigint():
    """In the child: SIGINT's default action. A shell starts a background job with SIGINT
    ignored, and exec keeps that, so a suite run with `&` (or nohup) would send its SIGINTs
    to trainers that never see them (an evaluation installs no handler of its own)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def piped(argv):
    return subprocess.Popen([OPT.trainer] + argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, preexec_fn=default_sigint)


def read_until(p, pattern):
    """The lines p prints up to the first that matches pattern (None: it ended first)."""
    seen = []
    for line in p.stdout:
        seen.append(line)
        if re.search(pattern, line):
            return seen
    return None


@test
def sigint_saves_and_resumes():
    """SIGINT after step 2's line: the step ends, a checkpoint is saved, the run exits 130
    naming --resume; the step lines came through the pipe as printed (no block buffer: 4 KB
    is 29 step lines); --resume alone ends bit-identical to an uninterrupted run."""
    full = fresh_dir("sigint_full")
    r = run(TINY + ["--out_dir", full])
    if r.returncode != 0:
        raise AssertionError("uninterrupted run failed (exit %d): %s" % (r.returncode, tail(r)))
    out = fresh_dir("sigint")
    p = piped(TINY + ["--out_dir", out])
    if read_until(p, r"^step +2/40") is None:
        raise AssertionError("the run ended (exit %s) before printing step 2" % p.wait())
    p.send_signal(signal.SIGINT)
    rest = p.stdout.read()
    p.wait(timeout=TIMEOUT)
    m = re.search(r"stopped by SIGINT after step (\d+) of 40; continue with --resume (\S+)", rest)
    bad = []
    if p.returncode != 130:
        bad.append("exit %d, expected 130" % p.returncode)
    if not m:
        bad.append("no 'stopped by SIGINT ... --resume' line: %r" % rest[-300:])
    else:
        stopped = int(m.group(1))
        if not 2 <= stopped < 20:
            bad.append("stopped after step %d, not within a few steps of the signal (block-buffered output?)" % stopped)
        if log_lines(os.path.join(out, "log.jsonl")) != stopped:
            bad.append("the log has %d steps, the checkpoint %d" % (log_lines(os.path.join(out, "log.jsonl")), stopped))
    if bad:
        raise AssertionError("; ".join(bad))
    r = run(["--resume", os.path.join(out, "checkpoint.bin"), "--threads", "2"])
    if r.returncode != 0:
        raise AssertionError("--resume alone failed (exit %d): %s" % (r.returncode, tail(r)))
    same = (sha(os.path.join(out, "checkpoint.bin")) == sha(os.path.join(full, "checkpoint.bin")) and
            losses(os.path.join(out, "log.jsonl")) == losses(os.path.join(full, "log.jsonl")))
    if not same:
        raise AssertionError("resumed after SIGINT at step %s: checkpoint or losses differ from the uninterrupted run"
                             % m.group(1))
    return "stopped after step %s of 40 (exit 130); --resume alone: bit-identical checkpoint and losses" % m.group(1)


@test
def second_sigint_stops_at_once():
    out = fresh_dir("sigint_twice")
    p = piped(TINY + ["--out_dir", out])
    if read_until(p, r"^step +2/40") is None:
        raise AssertionError("the run ended (exit %s) before printing step 2" % p.wait())
    p.send_signal(signal.SIGINT)
    if read_until(p, r"stopping after this step") is None:
        raise AssertionError("no acknowledgement of the first SIGINT (exit %s)" % p.wait())
    p.send_signal(signal.SIGINT)
    rest = p.stdout.read()
    p.wait(timeout=TIMEOUT)
    if p.returncode != -signal.SIGINT or "stopped by SIGINT" in rest:
        raise AssertionError("exit %d, expected death by SIGINT at once: %r" % (p.returncode, rest[-200:]))
    return "killed by the second SIGINT"


@test
def generate_streams():
    """--generate prints each token as it is picked: the reader gets the prompt and the first
    tokens while it runs, not a 4 KB block (about 3.7 KB of text after the lines before it)."""
    if "train_gpt_cpu" not in os.path.basename(OPT.trainer):
        raise Skip("--generate runs on the CPU trainer only")
    ckpt = reference()["ckpt"]
    p = subprocess.Popen([OPT.trainer, "--resume", ckpt, "--steps", "0", "--generate", "50000", "--prompt", "The ",
                          "--threads", "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got = b""
    while b"The " not in got or len(got) < got.find(b"The ") + 8:  # the prompt, then generated bytes
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        got += chunk
    running = p.poll() is None
    kill(p)
    text = got[got.find(b"The "):] if b"The " in got else b""
    if not running or not text or len(text) >= 2048:  # a 4 KB block, less the lines before the prompt, is more
        raise AssertionError("%d bytes of generated text read %s the run ended" % (len(text), "before" if running else "after"))
    return "%d bytes of text arrived while it was still generating" % len(text)


def main():
    global OPT, TMP
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", default="./train_gpt_cpu", help="the trainer (a sanitizer build; ./train_gpt on a GPU)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the kill moments and junk files")
    ap.add_argument("--trials", type=int, default=24, help="SIGKILL trials")
    ap.add_argument("--only", action="append", default=[], help="run only this test (repeatable)")
    OPT = ap.parse_args()
    OPT.trainer = os.path.abspath(OPT.trainer)
    print("crash safety: trainer %s, seed %d, %d trials" % (OPT.trainer, OPT.seed, OPT.trials), flush=True)
    missing = [p for p in (OPT.trainer, os.path.join(ROOT, "data/builtin/train.bin")) if not os.path.exists(p)]
    if missing:
        print("FAIL: setup: %s missing (make train_gpt_cpu data)" % ", ".join(missing))
        print("0 passed, 1 failed, 0 skipped")
        sys.exit(1)
    TMP = tempfile.mkdtemp(prefix="test_crash_safety_")
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    try:
        unknown = [n for n in OPT.only if n not in [fn.__name__ for fn in TESTS]]
        if unknown:
            sys.exit("--only %s: no such test (%s)" % (unknown[0], ", ".join(fn.__name__ for fn in TESTS)))
        for fn in TESTS:
            if OPT.only and fn.__name__ not in OPT.only:
                continue
            try:
                status, why = "PASS", fn()
            except Skip as e:
                status, why = "SKIP", str(e)
            except Exception as e:  # noqa: BLE001
                status, why = "FAIL", "%s: %s" % (type(e).__name__, e)
                if os.environ.get("VERBOSE"):
                    traceback.print_exc()
            counts[status] += 1
            print("%s: %s%s" % (status, fn.__name__, ": " + why if why else ""), flush=True)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    sys.exit(1 if counts["FAIL"] else 0)


if __name__ == "__main__":
    main()
