"""One line, not a traceback, when a script lacks a Python package (issue 25). Standard
library only.

A script that needs numpy, torch, matplotlib or tokenizers imports them (and the project
modules that import them) as

    import needs  # noqa: E402
    with needs.deferred(__name__) as missing:
        import numpy as np
        import tensorfile  # noqa: E402

and calls missing.check() in main() right after parse_args(), so that --help and usage
errors need no package, and a missing one ends the script with one line on stderr and
exit status 1:

    error: dev/ablate.py needs numpy: run `make venv` and use .venv/bin/python (or pip install numpy)

Imported as a module (by a test or another script) the ImportError propagates as usual.
missing(e) prints the same line for an ImportError caught later (a package imported inside
a function). The packages dev/requirements.txt pins are the ones `make venv` installs;
for another (torch, transformers) the line says so.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script():
    """The running script as typed from the repository root: dev/ablate.py."""
    p = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not p or not os.path.isfile(p):
        return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    rel = os.path.relpath(p, ROOT)
    return p if rel.startswith("..") else rel.replace(os.sep, "/")


def venv_packages():
    """The lower-case package names dev/requirements.txt pins (what `make venv` installs)."""
    try:
        with open(os.path.join(ROOT, "dev", "requirements.txt"), encoding="utf-8") as f:
            lines = [ln.split("#")[0].strip() for ln in f]
    except OSError:
        return set()
    return {re.split(r"[\s<>=!~;\[]", ln, maxsplit=1)[0].lower() for ln in lines if ln}


def message(exc):
    """The one line for an ImportError."""
    pkg = (getattr(exc, "name", None) or "").split(".")[0]
    if not pkg:
        return "error: %s cannot import what it needs: %s" % (script(), " ".join(str(exc).split()))
    if not isinstance(exc, ModuleNotFoundError):  # present but broken or of another version
        return "error: %s cannot import from %s (%s): reinstall it (`make venv`, or pip install -U %s)" % (
            script(), pkg, " ".join(str(exc).split()), pkg)
    if pkg.lower() in venv_packages():
        return "error: %s needs %s: run `make venv` and use .venv/bin/python (or pip install %s)" % (
            script(), pkg, pkg)
    return "error: %s needs %s, which `make venv` does not install: pip install %s" % (script(), pkg, pkg)


def missing(exc):
    """Exit 1 with the one line naming the package an ImportError lacks."""
    sys.stderr.write(message(exc) + "\n")
    sys.stderr.flush()
    sys.exit(1)


class deferred:
    """`with deferred(__name__) as missing:` around a script's imports; see the docstring.
    Run as the main script, an ImportError in the block is kept (the rest of the block is
    skipped) until check(); imported as a module, it propagates."""

    def __init__(self, module_name):
        self.main = module_name == "__main__"
        self.error = None

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if typ is not None and issubclass(typ, ImportError) and self.main:
            self.error = exc
            return True
        return False

    def check(self):
        """Exit with the one line when an import of the block failed."""
        if self.error is not None:
            missing(self.error)


# ---- for the tests (data/test_data.py, dev/test_eval_scripts.py) -----------------------------
HIDEABLE = ("numpy", "torch", "matplotlib", "tokenizers", "transformers", "datasets")


def hiding_env(d, *packages):
    """os.environ with a PYTHONPATH (folder d, made once) of modules that fail as missing
    `packages` do (default: all of HIDEABLE)."""
    if not os.path.isdir(d):
        os.makedirs(d)
        for p in packages or HIDEABLE:
            with open(os.path.join(d, p + ".py"), "w") as f:
                f.write("raise ModuleNotFoundError(\"No module named '%s' (hidden by the test)\", name=%r)\n" % (p, p))
    return dict(os.environ, PYTHONPATH=d)


def pythons():
    """This Python and the system python3 (PATH's), when that is another one."""
    import shutil
    sys3 = shutil.which("python3")
    return [sys.executable] + ([sys3] if sys3 and os.path.realpath(sys3) != os.path.realpath(sys.executable) else [])
