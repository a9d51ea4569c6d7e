"""The README's commands, run as written on a fresh copy of the repository.

    python dev/test_readme.py [--readme FILE] [-x] [--keep]

First, the README against the trainer's --help: the `--pos` and `--pe` columns of its
scheme table and its sentence "`--model` presets: ..." hold every value --help lists and
nothing else; and every relative link reaches its file (and heading). Then every fenced
```sh block of the README, in order, in one fresh copy of the repository (the files
`git ls-files` lists, tracked and untracked but not ignored: what a clone of this tree
holds), each command as written (continued lines joined), checking exit 0. A plain ```
block after a ```sh block is what those commands print on stdout (stderr's progress lines
come when a clock says so): its lines must appear there in order, consecutive except where
the block has a `...` line (blank lines aside; an evaluation's seconds, `, 3.7s)`, are the
one field not compared).

A block that cannot run here (a GPU, a download, a cluster, an hour of CPU) has the line
`<!-- not run by dev/test_readme.py: REASON -->` just before its fence, and each of its
commands is reported as SKIP with that reason. `make venv` finds the project's own .venv
(linked into the copy; without one, the commands that need it skip). Prints PASS/FAIL/SKIP
lines and "N passed, N failed, N skipped"; exits 1 on a failure. -x stops at the first
failure; --keep leaves the copy (its path is printed). The quick start's two training runs
are most of its time.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKIP_MARK = re.compile(r"^<!-- not run by dev/test_readme\.py: (.+?) -->$")
SECONDS = re.compile(r", [0-9.]+s\)")  # an evaluation's wall time: "(rope, ..., 20 sequences, 3.7s)"
TIMEOUT_S = 3600  # one command: a quick-start run takes about a minute on 2 idle cores


# ---- the README -----------------------------------------------------------------------
class Block:
    def __init__(self, line, text, skip):
        self.line, self.text, self.skip = line, text, skip  # line: the fence's line number
        self.expected = None  # the plain block after it: (line, text)

    def commands(self):
        """[(line, command)]: continued lines joined, comment lines and blank lines left out."""
        out, cur, start = [], "", None
        for i, raw in enumerate(self.text.splitlines()):
            if not cur and (not raw.strip() or raw.lstrip().startswith("#")):
                continue
            if start is None:
                start = self.line + 1 + i
            if raw.endswith("\\"):
                cur += raw[:-1] + " "
                continue
            out.append((start, (cur + raw).strip()))
            cur, start = "", None
        if cur:
            raise ValueError("README line %d: a command ends with a backslash" % start)
        return out


def read_blocks(path):
    """The ```sh blocks of a Markdown file, in order, each with its output block if any."""
    lines = open(path, encoding="utf-8").read().splitlines()
    blocks, i, last_text = [], 0, ""
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            if lines[i].strip():
                last_text = lines[i].strip()
            i += 1
            continue
        lang, start = fence[3:].strip(), i + 1
        j = start
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError("%s line %d: a fenced block that never closes" % (path, i + 1))
        text = "\n".join(lines[start:j])
        if lang == "sh":
            m = SKIP_MARK.match(last_text)
            blocks.append(Block(i + 1, text, m.group(1) if m else None))
        elif lang == "" and blocks and blocks[-1].expected is None:
            blocks[-1].expected = (i + 1, text)
        elif lang == "":
            raise ValueError("%s line %d: an output block with no ```sh block before it" % (path, i + 1))
        last_text, i = "", j + 1
    return blocks


def cells(row):
    """The cells of a Markdown table row (an escaped `\\|` stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip()[1:-1])]


def table_names(readme, header_cell, column):
    """Backticked names in column `column` of the Markdown table whose header row has
    `header_cell`, and of the rows of that table."""
    rows, inside = [], False
    for line in readme.splitlines():
        if not inside:
            inside = line.startswith("|") and header_cell in line
            continue
        if not line.startswith("|"):
            break
        rows.append(line)
    column_cells = [cells(r)[column] if len(cells(r)) > column else "" for r in rows[1:]]
    return {name for c in column_cells for name in re.findall(r"`([^`]+)`", c)}


def model_presets(readme):
    """Backticked names of the README's sentence "`--model` presets: ...", to its full stop."""
    at = readme.find("`--model` presets:")
    if at < 0:
        return set()
    text = readme[at + len("`--model` presets:"):]
    return set(re.findall(r"`([^`]+)`", text[:text.find(".")]))


def help_lists(trainer):
    """{'--pos': names, '--pe': names, '--model': names} from the trainer's --help."""
    text = subprocess.run([trainer, "--help"], capture_output=True, text=True, timeout=60).stdout
    out, current = {"--pos": set(), "--pe": set(), "--model": set()}, None
    for line in text.splitlines():
        flag = re.match(r"^  (--\S+)", line)
        if flag:
            current = flag.group(1)
            if current == "--model":
                presets = line.split("preset:", 1)[1]
                out["--model"] = {p.split()[0] for p in presets.split(",")}
            continue
        value = re.match(r"^ {21}(\S+) ", line)
        if value and current in ("--pos", "--pe"):
            out[current].add(value.group(1))
    return out


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(readme):
    """The README's relative links whose file, or whose #anchor in a Markdown file, is missing."""
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", readme):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.join(ROOT, path) if path else os.path.join(ROOT, "README.md")
        if not os.path.exists(full):
            bad.append(target)
        elif anchor and full.endswith(".md"):
            heads = [slug(l.lstrip("#")) for l in open(full, encoding="utf-8") if l.startswith("#")]
            if anchor not in heads:
                bad.append(target)
    return bad


# ---- the fresh copy ---------------------------------------------------------------------
def fresh_copy(dest):
    """What a clone of this tree holds: the files git lists (tracked, and untracked but not
    ignored), copied. The project's .venv is linked when it matches dev/requirements.txt, and
    the copy's requirements file dated before it, so `make venv` finds it made. Returns
    whether a .venv is there."""
    names = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = os.path.join(ROOT, name)
        if not os.path.lexists(src):  # removed in the tree, not yet committed
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, name)) or dest, exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), os.path.join(dest, name))
        else:
            shutil.copy(src, os.path.join(dest, name))
    venv_req = os.path.join(ROOT, ".venv", "requirements.txt")
    req = os.path.join(ROOT, "dev", "requirements.txt")
    if not (os.path.exists(venv_req) and open(venv_req).read() == open(req).read()):
        return False
    os.symlink(os.path.realpath(os.path.join(ROOT, ".venv")), os.path.join(dest, ".venv"))
    made = os.path.getmtime(venv_req)
    os.utime(os.path.join(dest, "dev", "requirements.txt"), (made - 1, made - 1))
    return True


def needs_venv(cmd):
    return ".venv/" in cmd or cmd.startswith("make venv")


# ---- comparing output ---------------------------------------------------------------------
def normalize(line):
    return SECONDS.sub(", <seconds>s)", line.rstrip())


def output_mismatch(expected, printed):
    """None when the expected block's lines appear in `printed` in order (consecutive within
    each part between `...` lines), else what is missing."""
    exp = [normalize(l) for l in expected.splitlines() if l.strip()]
    out = [normalize(l) for l in printed.splitlines() if l.strip()]
    parts, cur = [], []
    for line in exp:
        if line.strip() == "...":
            parts.append(cur)
            cur = []
        else:
            cur.append(line)
    parts.append(cur)
    at = 0
    for part in filter(None, parts):
        found = next((k for k in range(at, len(out) - len(part) + 1) if out[k:k + len(part)] == part), None)
        if found is None:
            near = next((k for k in range(at, len(out)) if out[k] == part[0]), None)
            if near is None:
                return "%r is not printed%s" % (part[0], " after the lines shown before it" if at else "")
            shown, printed = next((p, o) for p, o in zip(part, out[near:] + [""] * len(part)) if p != o)
            return "%r is printed (line %d), but then %r where the README shows %r" % (part[0], near + 1, printed, shown)
        at = found + len(part)
    return None


# ---- the run -------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"), help="the file to read (default README.md)")
    ap.add_argument("-x", action="store_true", help="stop at the first failure")
    ap.add_argument("--keep", action="store_true", help="keep the fresh copy and each command's output (printed_line<N>.txt beside it)")
    args = ap.parse_args()
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}

    def report(status, what):
        counts[status] += 1
        print("%s: %s" % (status, what), flush=True)
        if status == "FAIL" and args.x:
            finish()

    def finish():
        print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("the copy: %s" % copy)
        sys.exit(1 if counts["FAIL"] else 0)

    tmp = tempfile.mkdtemp(prefix="test_readme_")
    copy = os.path.join(tmp, "posaug.c")
    readme = open(args.readme, encoding="utf-8").read()
    try:
        blocks = read_blocks(args.readme)
    except ValueError as e:
        report("FAIL", "reading the README: %s" % e)
        finish()

    trainer = os.path.join(ROOT, "train_gpt_cpu")
    if not os.access(trainer, os.X_OK):
        report("SKIP", "the README's lists against --help: no ./train_gpt_cpu (run make)")
    else:
        lists = help_lists(trainer)
        readme_lists = {"--pos": table_names(readme, "| `--pos` |", 0),
                        "--pe": table_names(readme, "| `--pe` |", 3),
                        "--model": model_presets(readme)}
        for flag in ("--pos", "--pe", "--model"):
            want, have = lists[flag], {n for n in readme_lists[flag] if n}
            missing, extra = sorted(want - have), sorted(have - want)
            report("FAIL" if missing or extra or not want else "PASS",
                   "the README's %s list is --help's (%d values)%s%s" % (
                       flag, len(want), "; missing: %s" % ", ".join(missing) if missing else "",
                       "; not in --help: %s" % ", ".join(extra) if extra else ""))

    bad = broken_links(readme)
    report("FAIL" if bad else "PASS", "the README's links reach their files and headings%s" % (
        ": broken: " + ", ".join(bad) if bad else ""))

    os.makedirs(copy)
    have_venv = fresh_copy(copy)
    env = dict(os.environ)
    env.pop("PROGRESS_EVERY", None)
    for b in blocks:
        for line, cmd in b.commands():
            short = cmd if len(cmd) <= 100 else cmd[:97] + "..."
            if b.skip:
                report("SKIP", "README line %d: %s: %s" % (line, short, b.skip))
                continue
            if needs_venv(cmd) and not have_venv:
                report("SKIP", "README line %d: %s: no .venv made from dev/requirements.txt (make venv)" % (line, short))
                continue
            t0 = time.time()
            try:
                r = subprocess.run(["bash", "-c", cmd], cwd=copy, env=env, capture_output=True, text=True,
                                   timeout=TIMEOUT_S)
                rc, printed, err = r.returncode, r.stdout, r.stderr
            except subprocess.TimeoutExpired as e:
                rc, printed = "timeout after %d s" % TIMEOUT_S, ""
                err = b"".join(x for x in (e.stdout, e.stderr) if x).decode(errors="replace")
            b.printed = getattr(b, "printed", "") + printed
            if args.keep:
                with open(os.path.join(tmp, "printed_line%d.txt" % line), "w") as f:
                    f.write(printed + err)
            if rc == 0:
                report("PASS", "README line %d: %s (%.0f s)" % (line, short, time.time() - t0))
            else:
                tail = "\n    ".join((printed + err).rstrip().splitlines()[-8:])
                report("FAIL", "README line %d: %s: exit %s\n    %s" % (line, short, rc, tail))
        if b.expected is None:
            continue
        line, text = b.expected
        if b.skip or not hasattr(b, "printed"):
            report("SKIP", "README line %d: the output shown: its commands did not run" % line)
            continue
        why = output_mismatch(text, b.printed)
        if why:
            why += "\n    printed:\n    " + "\n    ".join(b.printed.rstrip().splitlines()[-20:])
        report("FAIL" if why else "PASS", "README line %d: the output shown (%d lines)%s" % (
            line, len([l for l in text.splitlines() if l.strip()]), ": " + why if why else ", printed"))
    finish()


if __name__ == "__main__":
    main()
