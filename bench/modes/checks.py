"""checks.py — what the bench's numpy re-computations (agreement_check.py,
agreement_eval_check.py) share: a check printed as "ok ..." or "FAIL ...", the bench run
the rest reads, and the exit status that counts the failures."""
import subprocess
import sys

failed = 0


def check(ok, what, detail=""):
    global failed
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"))
    failed += 0 if ok else 1


def run_or_exit(args, what):
    """Runs args; a run that fails is the one failure reported, as nothing else can be read."""
    out = subprocess.run(args, capture_output=True, text=True)
    check(out.returncode == 0, what, out.stderr)
    if failed:
        sys.exit(1)
    return out


def finish():
    sys.exit(1 if failed else 0)
