"""The size of the product's code, as issue 27 measured it: Python tokens of `talos_ls/`,
comments and layout (newlines, indentation) not counted, so a reformat or a comment changes
nothing and a removed duplicate shows. Per commit, to say whether a change shrank the code:

    python3 tools/code_size.py                 # the working tree
    python3 tools/code_size.py HEAD~5 HEAD     # each commit's talos_ls/, read from git
    python3 tools/code_size.py --files         # the largest modules first
"""

from __future__ import annotations

import argparse
import io
import subprocess
import tarfile
import tokenize
from pathlib import Path

LAYOUT = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.ENCODING,
}
ROOT = Path(__file__).resolve().parents[1]


def tokens(source: bytes) -> int:
    return sum(1 for t in tokenize.tokenize(io.BytesIO(source).readline) if t.type not in LAYOUT)


def sources(commit: str | None) -> dict[str, bytes]:
    """Every `talos_ls/**.py` of the working tree, or of `commit`."""
    if commit is None:
        return {str(p.relative_to(ROOT)): p.read_bytes() for p in ROOT.glob("talos_ls/**/*.py")}
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "talos_ls"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile() and m.name.endswith(".py")
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commits", nargs="*", help="commits to measure (default: the tree)")
    parser.add_argument("--files", action="store_true", help="the 20 largest modules too")
    args = parser.parse_args()
    for commit in args.commits or [None]:
        sizes = {name: tokens(text) for name, text in sources(commit).items()}
        print(f"{commit or 'working tree'}: {sum(sizes.values()):,} tokens")
        if args.files:
            for name, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:20]:
                print(f"  {n:>7,} {name}")


if __name__ == "__main__":
    main()
