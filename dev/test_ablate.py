"""Tests for dev/ablate.py's ways of running a table: one run after another, --jobs N on the
cores, --gpus through a stand-in trainer that records the CUDA_VISIBLE_DEVICES each run saw,
and --slurm on a real single-node Slurm cluster started here; and its refusals (a seed listed
twice, a fine-tune whose baseline has no finished evaluation).

    python dev/test_ablate.py [NAME...]     # only the tests whose names contain a NAME

The table is Table 6's baseline and PosAug fine-tune rows over seeds 42 and 7 (a fine-tune
waits for its baseline), trained by the CPU trainer made tiny by a stand-in that appends
--steps 2 and a one-sequence evaluation to every command, the same in every mode. Each mode's
table.md must equal the sequential run's byte for byte.

The Slurm tests use Debian's slurmctld, slurmd and munge, installed with apt-get when missing
(as root; without root or apt-get they skip, saying why). The cluster is this machine: a
slurm.conf in a temporary folder (no accounting database, proctrack/linuxproc, task/none), its
own munged socket and free ports, the daemons in the foreground, stopped by their PIDs.
Prints PASS/FAIL/SKIP per test and "N passed, N failed, N skipped"; about 2 minutes on 2 cores.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from testkit import Skip, Suite, check  # noqa: E402 (dev/, this file's folder)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TMP = tempfile.mkdtemp(prefix="test_ablate_")
TRAINER = os.path.join(ROOT, "train_gpt_cpu")
TABLE = ["--table", "6", "--cpu", "--rows", "rope,posaug_ft", "--seeds", "42,7"]
RUNS = ["rope_seed42", "rope_seed7", "posaug_ft_seed42", "posaug_ft_seed7"]
TINY = "--steps 2 --warmup 1 --eval_n 1 --gain_window 0 --total_batch 4 --batch_size 4"
SUITE = Suite()
test = SUITE.test


# ---- the stand-in trainer and the runs it records ---------------------------------------
# The real CPU trainer with flags appended (the last value of a flag wins), and one line per
# run in $STANDIN_RECORD: start/end, the run folder, CUDA_VISIBLE_DEVICES, the time. A run
# whose folder is named $STANDIN_FAIL fails; one named $STANDIN_HOLD waits (for scancel).
STANDIN = r"""#!/bin/bash
[ "$1" = --help ] && exec %(trainer)s --help
out=; prev=
for a in "$@"; do [ "$prev" = --out_dir ] && out=$a; prev=$a; done
run=$(basename "$out")
echo "start $run ${CUDA_VISIBLE_DEVICES-unset} $(date +%%s.%%N)" >> "$STANDIN_RECORD"
if [ "$run" = "${STANDIN_FAIL-}" ]; then echo "stand-in: $run made to fail"; exit 3; fi
if [ "$run" = "${STANDIN_HOLD-}" ]; then touch "$STANDIN_RECORD.held"; sleep 300; fi
%(trainer)s "$@" %(extra)s
rc=$?
echo "end $run ${CUDA_VISIBLE_DEVICES-unset} $(date +%%s.%%N)" >> "$STANDIN_RECORD"
exit $rc
"""


def standin(name, extra):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(STANDIN % dict(trainer=TRAINER, extra=extra))
    os.chmod(path, 0o755)
    return path


def tiny_trainer():
    return standin("tiny.sh", TINY)


def records(path):
    """{run: [(start, end, device)]} from a stand-in's record (end None: did not end)."""
    out = {}
    with open(path) as f:
        for line in f:
            kind, run, dev, t = line.split()
            if kind == "start":
                out.setdefault(run, []).append([float(t), None, dev])
            else:
                out[run][-1][1] = float(t)
    return out


def ablate(*args, env=None, timeout=600):
    p = subprocess.run([sys.executable, os.path.join(HERE, "ablate.py")] + list(args), capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def env_with(**kw):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in kw.items()})
    return env


def read(path):
    with open(path, "rb") as f:
        return f.read()


REF = {}


def reference():
    """The sequential table (and its CSV) at a fixed --out, moved aside: every mode's table is
    made at the same --out, so that the command table.md quotes is the same."""
    if not REF:
        out, rec = os.path.join(TMP, "table"), os.path.join(TMP, "seq.rec")
        trainer = tiny_trainer()
        rc, so, se = ablate(*TABLE, "--trainer", trainer, "--out", out, env=env_with(STANDIN_RECORD=rec))
        check(rc == 0, "sequential table: %d %s %s" % (rc, so[-1500:], se[-1500:]))
        ref = os.path.join(TMP, "seq")
        os.rename(out, ref)
        REF.update(md=read(os.path.join(ref, "table.md")), csv=read(os.path.join(ref, "table.csv")),
                   trainer=trainer, out=out, rec=records(rec))
        check(b"| Baseline (2 seeds) (baseline) |" in REF["md"] and b"fine-tuned" in REF["md"], REF["md"][:1500])
    return REF


def same_as_reference(out, what):
    for name in ("table.md", "table.csv"):
        got = read(os.path.join(out, name))
        want = REF["md" if name == "table.md" else "csv"]
        check(got == want, "%s: %s differs from the sequential one:\n%s\n--- sequential:\n%s" % (
            what, name, got.decode()[:2000], want.decode()[:2000]))


def move_aside(out):
    if os.path.exists(out):
        os.rename(out, out + ".%d" % int(time.time() * 1e6))


def overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


def check_fine_tunes_waited(rec):
    for seed in (42, 7):
        base, ft = rec["rope_seed%d" % seed][-1], rec["posaug_ft_seed%d" % seed][-1]
        check(base[1] is not None and ft[0] >= base[1], "seed %d: the fine-tune started at %.3f, before its "
              "baseline's run ended (%s)" % (seed, ft[0], base[1]))


# ---- refusals ---------------------------------------------------------------------------

@test
def seeds_listed_twice_refused():
    """--seeds 42,7,42 would run seed 42 once and count it twice (mean +- std over 3 'seeds')."""
    out = os.path.join(TMP, "dup")
    trainer = tiny_trainer()
    for extra in (["--dry_run"], []):
        rc, so, se = ablate("--table", "6", "--cpu", "--rows", "rope", "--seeds", "42,7,42", "--trainer", trainer,
                            "--out", out, *extra, env=env_with(STANDIN_RECORD=os.path.join(TMP, "dup.rec")))
        check(rc != 0 and se.strip() == "ablate.py: error: --seeds: 42 listed twice (a seed is one run: the mean and "
              "std would count it twice)", "%s: %d %s %s" % (extra, rc, so[-800:], se[-800:]))
        check(not os.path.exists(out), "%s: the refusal created %s" % (extra, out))


@test
def fine_tune_refused_until_its_baseline_is_evaluated():
    """A baseline stopped at step 1 of 600 (a checkpoint, no evaluation: what an interrupted
    baseline leaves) is no start for a fine-tune: refused up front naming the row to finish;
    a baseline that fails in the same command keeps its fine-tune from starting."""
    out = os.path.join(TMP, "ft")
    rec = os.path.join(TMP, "ft.rec")
    env = env_with(STANDIN_RECORD=rec)
    p = subprocess.run([TRAINER, "--model", "tiny", "--steps", "600", "--stop_after", "1", "--total_batch", "4",
                        "--batch_size", "4", "--eval_len", "1024", "--out_dir", os.path.join(out, "rope_seed42")],
                       capture_output=True, text=True, cwd=ROOT)
    check(p.returncode == 0 and os.path.exists(os.path.join(out, "rope_seed42", "checkpoint.bin")),
          "baseline stopped at step 1: %d %s" % (p.returncode, p.stderr[-800:]))
    rc, so, se = ablate("--table", "6", "--cpu", "--rows", "posaug_ft", "--seeds", "42", "--trainer", tiny_trainer(),
                        "--out", out, env=env)
    check(rc == 1 and se.startswith("ablate.py: error: row 'posaug_ft' fine-tunes row 'rope'")
          and "a checkpoint at step 1 of 600, no evaluation" in se and "run --rows rope first" in se
          and len(se.strip().splitlines()) == 1, "baseline at step 1: %d %s %s" % (rc, so[-800:], se[-800:]))
    check(not os.path.exists(os.path.join(out, "posaug_ft_seed42")), "the refused fine-tune made its folder")
    # the baseline in the same command, made to fail: the fine-tune does not start
    rc, so, se = ablate("--table", "6", "--cpu", "--rows", "rope,posaug_ft", "--seeds", "42", "--trainer", tiny_trainer(),
                        "--out", out, env=env_with(STANDIN_RECORD=rec, STANDIN_FAIL="rope_seed42"))
    check(rc == 1 and "seed 42: not started: row 'posaug_ft' fine-tunes row 'rope'" in so
          and "posaug_ft seed 42 (" in so and "rope seed 42 (Baseline): failed or stopped; log %s" % os.path.join(
              out, "rope_seed42", "train.log") in so, "failed baseline: %d %s %s" % (rc, so[-1500:], se[-800:]))
    check(not os.path.exists(os.path.join(out, "posaug_ft_seed42")), "a fine-tune started from a failed baseline")
    # finished (resumed from its checkpoint), the baseline lets the fine-tune run
    rc, so, se = ablate("--table", "6", "--cpu", "--rows", "rope,posaug_ft", "--seeds", "42", "--trainer", tiny_trainer(),
                        "--out", out, env=env)
    check(rc == 0 and os.path.exists(os.path.join(out, "posaug_ft_seed42", "eval_L1024.json")),
          "after the baseline: %d %s %s" % (rc, so[-1500:], se[-800:]))
    check("--resume %s" % os.path.join(out, "rope_seed42", "checkpoint.bin")
          in read(os.path.join(out, "rope_seed42", "train.log")).decode(), "the baseline was not resumed")


# ---- one machine: --jobs, --gpus ------------------------------------------------------

@test
def jobs_2_same_table_as_sequential():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores < 2:
        raise Skip("one core: --jobs 2 is refused (more runs at a time than cores)")
    ref = reference()
    rec = os.path.join(TMP, "jobs.rec")
    move_aside(ref["out"])
    t0 = time.time()
    rc, so, se = ablate(*TABLE, "--trainer", ref["trainer"], "--out", ref["out"], "--jobs", "2",
                        env=env_with(STANDIN_RECORD=rec))
    dt = time.time() - t0
    check(rc == 0, "--jobs 2: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    same_as_reference(ref["out"], "--jobs 2")
    threads = cores // 2
    for run in RUNS:
        log = read(os.path.join(ref["out"], run, "train.log")).decode()
        check("--threads %d\n" % threads in log, "%s: no --threads %d in %s" % (run, threads, log[:600]))
    r = records(rec)
    spans = [(s, e) for run in RUNS for s, e, _ in r[run]]
    check(overlap(r["rope_seed42"][0], r["rope_seed7"][0]), "the two baselines did not run at the same time: %s" % r)
    check(max(sum(s <= t < e for s, e in spans) for t, _ in spans) <= 2, "more than 2 runs at a time: %s" % r)
    check_fine_tunes_waited(r)
    seq = sum(e - s for s, e, _ in (v[0] for v in ref["rec"].values()))
    return "same table.md; --threads %d each; %.1f s (the sequential runs' trainer time %.1f s)" % (threads, dt, seq)


@test
def gpus_one_run_per_listed_gpu():
    """--gpus 3,5 on a GPU-mode table: the stand-in runs the CPU trainer at the tiny scale
    (its appended --model tiny --eval_len 1024 --eval_tag eval_L8192 win) and records the
    CUDA_VISIBLE_DEVICES each run saw."""
    builtin = os.path.join(ROOT, "data", "builtin")
    if not os.path.exists(os.path.join(builtin, "val.bin")):
        raise AssertionError("no data/builtin/val.bin: run make")
    trainer = standin("gpu_standin.sh", "--model tiny --eval_len 1024 --eval_tag eval_L8192 --threads 1 " + TINY)
    out, rec = os.path.join(TMP, "gpus"), os.path.join(TMP, "gpus.rec")
    rc, so, se = ablate("--table", "6", "--rows", "rope,posaug,posaug_ft", "--seeds", "42,7", "--gpus", "3,5",
                        "--train_data", "data/builtin/train.bin", "--val_data", "data/builtin/val.bin",
                        "--vocab_size", "257", "--trainer", trainer, "--out", out,
                        env=env_with(STANDIN_RECORD=rec, CUDA_VISIBLE_DEVICES="0,1,2,3,4,5"))
    check(rc == 0 and os.path.exists(os.path.join(out, "table.md")), "--gpus: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    r = records(rec)
    check(sorted(r) == sorted(["rope_seed42", "rope_seed7", "posaug_seed42", "posaug_seed7", "posaug_ft_seed42",
                               "posaug_ft_seed7"]) and all(len(v) == 1 for v in r.values()), "runs: %s" % r)
    spans = [v[0] for v in r.values()]
    check(all(dev in ("3", "5") for _, _, dev in spans), "CUDA_VISIBLE_DEVICES seen: %s" % r)
    for a in spans:
        check(not any(b is not a and b[2] == a[2] and overlap(a, b) for b in spans), "two runs at once on GPU %s: %s"
              % (a[2], r))
    check(any(a[2] != b[2] and overlap(a, b) for a in spans for b in spans), "never two GPUs at once: %s" % r)
    check_fine_tunes_waited(r)
    check(" on GPU 3 " in so and " on GPU 5 " in so, so[-1500:])
    return "6 runs on GPUs %s" % ", ".join("%s x%d" % (g, sum(s[2] == g for s in spans)) for g in ("3", "5"))


# ---- Slurm ------------------------------------------------------------------------------

def which(cmd):
    return shutil.which(cmd, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def install_slurm():
    """Debian's slurmctld, slurmd and munge: present, or installed; Skip where that cannot be."""
    if os.geteuid() != 0:
        raise Skip("not root: the test cluster's slurmd runs as root (and installing Slurm with apt-get needs root)")
    tools = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scancel", "sinfo")
    if all(which(t) for t in tools):
        return "installed already"
    if not shutil.which("apt-get"):
        raise Skip("Slurm is not installed and there is no apt-get to install Debian's slurmctld, slurmd, munge")
    env = env_with(DEBIAN_FRONTEND="noninteractive")
    t0 = time.time()
    cmd = ["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=120", "slurmctld", "slurmd", "munge"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, env=env)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    check(p.returncode == 0 and all(which(t) for t in tools), "apt-get install slurmctld slurmd munge: exit %d\n%s"
          % (p.returncode, (p.stdout + p.stderr)[-1500:]))
    return "installed in %.0f s" % (time.time() - t0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """slurmctld + slurmd + munged on this machine, configured in a temporary folder."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="slurm_", dir=TMP)
        os.chmod(self.dir, 0o755)
        self.procs = []
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = env_with(SLURM_CONF=self.conf)

    def path(self, name):
        return os.path.join(self.dir, name)

    def daemon(self, name, cmd):
        log = open(self.path(name + ".out"), "w")
        self.procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)))

    def start(self):
        t0 = time.time()
        with open(self.path("munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.path("munge.key"), 0o600)
        self.daemon("munged", [which("munged"), "--foreground", "--force", "--key-file=" + self.path("munge.key"),
                               "--socket=" + self.path("munge.sock"), "--pid-file=" + self.path("munged.pid"),
                               "--log-file=" + self.path("munged.log"), "--seed-file=" + self.path("munged.seed")])
        node = subprocess.run([which("slurmd"), "-C"], capture_output=True, text=True).stdout.splitlines()[0]
        node = re.sub(r" RealMemory=\d+", "", node)   # what the node offers at registration, without a memory floor
        for d in ("state", "spool"):
            os.makedirs(self.path(d))
        conf = dict(ClusterName="ablatetest", SlurmctldHost="localhost(127.0.0.1)", SlurmctldPort=free_port(),
                    SlurmdPort=free_port(), SlurmUser="root", SlurmdUser="root", AuthType="auth/munge",
                    AuthInfo="socket=" + self.path("munge.sock"), CredType="cred/munge",
                    StateSaveLocation=self.path("state"), SlurmdSpoolDir=self.path("spool"),
                    SlurmctldPidFile=self.path("slurmctld.pid"), SlurmdPidFile=self.path("slurmd.pid"),
                    SlurmctldLogFile=self.path("slurmctld.log"), SlurmdLogFile=self.path("slurmd.log"),
                    ProctrackType="proctrack/linuxproc", TaskPlugin="task/none", SelectType="select/cons_tres",
                    SelectTypeParameters="CR_Core", SchedulerType="sched/builtin",
                    AccountingStorageType="accounting_storage/none", JobAcctGatherType="jobacct_gather/none",
                    JobCompType="jobcomp/none", MpiDefault="none", ReturnToService=2, KillWait=5)
        with open(self.conf, "w") as f:
            f.write("".join("%s=%s\n" % kv for kv in conf.items()))
            f.write("%s NodeAddr=127.0.0.1 State=UNKNOWN\n" % node)
            f.write("PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n")
        self.wait_for(lambda: os.path.exists(self.path("munge.sock")), 20, "munged's socket")
        self.daemon("slurmctld", [which("slurmctld"), "-D", "-f", self.conf])
        self.daemon("slurmd", [which("slurmd"), "-D", "-f", self.conf])
        self.wait_for(lambda: self.sinfo() == "idle", 60, "the node to be idle (sinfo)")
        return time.time() - t0

    def sinfo(self):
        p = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, env=self.env)
        return p.stdout.strip()

    def wait_for(self, cond, timeout, what):
        t0 = time.time()
        while not cond():
            for name, p in self.procs:
                check(p.poll() is None, "%s exited (%s) waiting for %s:\n%s" % (name, p.returncode, what, self.logs()))
            check(time.time() - t0 < timeout, "no %s after %d s:\n%s" % (what, timeout, self.logs()))
            time.sleep(0.2)

    def queued(self):
        p = subprocess.run(["squeue", "--noheader", "--array", "--format=%i %T"], capture_output=True, text=True,
                           env=self.env)
        check(p.returncode == 0, "squeue: %s" % p.stderr)
        return p.stdout.split("\n")[:-1]

    def wait_idle(self, timeout=300):
        self.wait_for(lambda: not self.queued(), timeout, "end of the jobs (squeue empty)")

    def logs(self):
        text = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log", "slurmctld.out", "slurmd.out", "munged.out"):
            try:
                text.append("--- %s:\n%s" % (name, "".join(open(self.path(name), errors="replace").readlines()[-15:])))
            except OSError:
                pass
        return "\n".join(text)

    def stop(self):
        if any(name == "slurmctld" and p.poll() is None for name, p in self.procs):
            subprocess.run(["scancel", "--user=%d" % os.getuid()], capture_output=True, env=self.env)
            try:
                self.wait_idle(60)
            except AssertionError:
                pass
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


CLUSTER = {}


def cluster():
    """The single-node cluster, started once for the Slurm tests (Skip where it cannot be)."""
    if "skip" in CLUSTER:
        raise Skip(CLUSTER["skip"])
    if "c" not in CLUSTER:
        try:
            how = install_slurm()
        except Skip as e:
            CLUSTER["skip"] = str(e)
            raise
        c = Cluster()
        CLUSTER["c"] = c
        CLUSTER["note"] = "Slurm %s, started in %.1f s" % (how, c.start())
    return CLUSTER["c"]


def job_ids(out):
    with open(os.path.join(out, "slurm", "jobs.json")) as f:
        return [j["job"] for j in json.load(f)]


@test
def slurm_array_table_same_as_sequential_failed_task_named():
    """--slurm: the table as two arrays (the fine-tunes after the first); one task made to
    fail is listed by row and seed with its logs (--collect); the same command resubmits it
    and, once it has run, writes the sequential table byte for byte."""
    c = cluster()
    ref = reference()
    move_aside(ref["out"])
    rec = os.path.join(TMP, "slurm.rec")
    t0 = time.time()
    args = list(TABLE) + ["--trainer", ref["trainer"], "--out", ref["out"], "--slurm"]
    rc, so, se = ablate(*args, env=dict(c.env, STANDIN_RECORD=rec, STANDIN_FAIL="posaug_ft_seed7"))
    check(rc == 0 and re.search(r"submitted job \d+: 2 run\(s\), rope_seed42, rope_seed7", so)
          and re.search(r"submitted job \d+: 2 run\(s\) \(fine-tunes, after their baselines' tasks of job \d+\)", so),
          "submission: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    script = os.path.join(ref["out"], "slurm", "ablate.sbatch")
    check(os.path.exists(script) and "--task \"${RUNS[$SLURM_ARRAY_TASK_ID]}\"" in read(script).decode(), script)
    c.wait_idle()
    rc, so, se = ablate(*(args[:-1] + ["--collect"]), env=c.env)
    first = job_ids(ref["out"])
    log = os.path.join(ref["out"], "posaug_ft_seed7", "train.log")
    task_log = os.path.join(ref["out"], "slurm", "%s_3.log" % first[1])
    check(rc == 1 and "1 of 4 runs not finished:\n  posaug_ft seed 7 (Baseline fine-tuned with PosAug [1/8, 8] (10%%)): "
          "failed or stopped; log %s, %s" % (log, task_log) in so, "--collect: %d %s %s" % (rc, so[-2000:], se[-800:]))
    check("stand-in: posaug_ft_seed7 made to fail" in read(log).decode(), read(log).decode()[-800:])
    check("seed 7: FAILED" in read(task_log).decode(), read(task_log).decode()[-800:])
    rc, so, se = ablate(*args, env=dict(c.env, STANDIN_RECORD=rec))
    check(rc == 0 and re.search(r"submitted job \d+: 1 run\(s\), posaug_ft_seed7\n", so)
          and "posaug_ft seed 7 (" in so, "resubmission: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    c.wait_idle()
    rc, so, se = ablate(*args, env=c.env)
    check(rc == 0 and "submitted" not in so, "after the arrays: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    same_as_reference(ref["out"], "--slurm")
    check_fine_tunes_waited(records(rec))
    return "%s; same table.md; 3 arrays in %.1f s" % (CLUSTER["note"], time.time() - t0)


@test
def slurm_cancelled_half_way_resumes():
    """scancel while a fine-tune's task is running: the rerun submits only the unfinished runs
    (the finished ones untouched) and ends with the sequential table."""
    c = cluster()
    ref = reference()
    move_aside(ref["out"])
    rec = os.path.join(TMP, "cancel.rec")
    args = list(TABLE) + ["--trainer", ref["trainer"], "--out", ref["out"], "--slurm"]
    rc, so, se = ablate(*args, env=dict(c.env, STANDIN_RECORD=rec, STANDIN_HOLD="posaug_ft_seed42"))
    check(rc == 0, "submission: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    c.wait_for(lambda: os.path.exists(rec + ".held"), 300, "the held fine-tune's task to start")
    rc, so, se = ablate(*args, env=c.env)
    check(rc == 0 and "still queued or running" in so and "posaug_ft seed 42 (" in so and "running (job " in so
          and "submitted" not in so, "rerun while it runs: %d %s %s" % (rc, so[-1500:], se[-800:]))
    p = subprocess.run(["scancel"] + job_ids(ref["out"]), capture_output=True, text=True, env=c.env)
    check(p.returncode == 0, "scancel: %s" % p.stderr)
    c.wait_idle()
    done = {run: os.path.getmtime(os.path.join(ref["out"], run, "eval_L1024.json")) for run in RUNS
            if os.path.exists(os.path.join(ref["out"], run, "eval_L1024.json"))}
    check("posaug_ft_seed42" not in done and "rope_seed42" in done, "after scancel: finished %s" % sorted(done))
    rc, so, se = ablate(*args, env=dict(c.env, STANDIN_RECORD=rec))
    left = [run for run in RUNS if run not in done]
    check(rc == 0 and re.search(r"submitted job \d+: %d run\(s\), %s\n" % (len(left), ", ".join(left)), so),
          "resubmission: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    c.wait_idle()
    rc, so, se = ablate(*args, env=c.env)
    check(rc == 0, "after the rerun: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    same_as_reference(ref["out"], "--slurm after scancel")
    for run, t in done.items():
        check(os.path.getmtime(os.path.join(ref["out"], run, "eval_L1024.json")) == t, "%s was run again" % run)
    return "cancelled with %d of 4 runs finished; the rerun ran %s" % (len(done), ", ".join(left))


@test
def slurm_dry_run_prints_the_script():
    """--slurm --dry_run: the script and the sbatch commands, nothing written or submitted;
    --help names the three ways."""
    rc, so, se = ablate("--help")
    check(rc == 0 and all(f in so for f in ("--gpus", "--jobs", "--slurm", "--slurm_args", "--collect")), so)
    out = os.path.join(TMP, "dry")
    rc, so, se = ablate("--table", "6", "--rows", "rope,posaug,posaug_ft", "--seeds", "42,137,2024", "--slurm",
                        "--dry_run", "--slurm_args", "--partition=gpu --gres=gpu:1 --time=1:00:00", "--out", out,
                        "--trainer", tiny_trainer(), env=env_with(PATH="/usr/bin:/bin"))
    check(rc == 0 and not os.path.exists(out), "dry run: %d %s %s" % (rc, so[-1500:], se[-1500:]))
    check("#SBATCH --output=%s/%%A_%%a.log" % os.path.join(out, "slurm") in so and "    posaug_ft_seed2024  # 8: " in so
          and "FIRST=$(sbatch --parsable --array=0-5 --partition=gpu --gres=gpu:1 --time=1:00:00 %s/slurm/ablate.sbatch)"
          % out in so and "\nsbatch --parsable --array=6-8 --dependency=afterany:${FIRST}_0:${FIRST}_1:${FIRST}_2 --partition=gpu" in so,
          so[-2500:])
    check(" --task \"${RUNS[$SLURM_ARRAY_TASK_ID]}\"" in so and "--slurm" not in so.split("RUNS=(")[1], so[-1500:])


def main():
    try:
        import numpy  # noqa: F401 (what dev/ablate.py's tables need)
    except ImportError:
        print("SKIP: the dev/ablate.py tests: numpy is not installed (make test installs it into .venv "
              "from dev/requirements.txt)")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    if not os.access(TRAINER, os.X_OK):
        print("FAIL: %s is not built (make)" % TRAINER)
        print("0 passed, 1 failed")
        return 1
    try:
        status = SUITE.run(names=sys.argv[1:], timed=True,
                           on_fail=lambda: print(CLUSTER["c"].logs()) if "c" in CLUSTER else None)
    finally:
        if "c" in CLUSTER:
            CLUSTER["c"].stop()
    if status == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
