"""``hofcat examples``: the example files shipped inside the package, listed with their paths or copied out.

An installed hofcat has no checkout beside it, so this is how a user finds the quickstart spec and the
published means the README's commands use: ``hofcat examples`` lists them, ``hofcat examples --copy DIR``
copies them into DIR (never over an existing file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "examples"
HELP = (
    "List the shipped example files (sweep spec, published per-question means) with their absolute paths, "
    "or copy them into a folder with --copy DIR (never overwrites)."
)

# One line per shipped file; a file not named here is described by its first comment or heading line.
DESCRIPTIONS = {
    "quickstart.toml": "a first sweep spec against the simulator (start `hofcat serve-sim`, port 8011); "
    "hofcat plan/run FILE",
    "cat_v2_table5_gpt35.csv": "CAT v2 paper, Table 5: GPT-3.5 per-question means, model and country level; "
    "hofcat score --means FILE --reference hofstede-2015",
    "cat_v2_ablation_gpt35.csv": "CAT v2 paper, Tables 9-17: GPT-3.5 per-question means of the temperature x top-p "
    "ablation; hofcat score --means FILE",
    "cat_v2_gpt35.provenance.md": "where the two CAT v2 files come from, and which published numbers reproduce",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--copy DIR."""
    parser.add_argument(
        "--copy",
        metavar="DIR",
        type=Path,
        default=None,
        help="copy every example file into DIR (created if missing); refuses to overwrite",
    )


def example_files() -> list[Path]:
    """The shipped example files, sorted by name."""
    from runner.errors import InputError
    from runner.survey.paths import EXAMPLES_DIR

    if not EXAMPLES_DIR.is_dir():  # HOFCAT_DATA_DIR names a data folder without examples/
        raise InputError(f"no examples folder at {EXAMPLES_DIR}")
    return sorted(
        (p for p in EXAMPLES_DIR.iterdir() if p.is_file() and not p.name.startswith(".")), key=lambda p: p.name
    )


def describe(path: Path) -> str:
    """The file's one-line description: from DESCRIPTIONS, else its first ``#`` line."""
    if path.name in DESCRIPTIONS:
        return DESCRIPTIONS[path.name]
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("#"):
                    return line.lstrip("#").strip()
                if line.strip():
                    break
    except (OSError, UnicodeDecodeError):
        pass
    return ""


def copy_examples(files: list[Path], target: Path) -> list[Path]:
    """Copy ``files`` into ``target``; raises ``InputError`` (copying nothing) when any would be overwritten."""
    from runner.errors import InputError

    if target.exists() and not target.is_dir():
        raise InputError(f"--copy {target}: not a folder")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--copy {target}: cannot create the folder ({exc.strerror or exc})") from None
    taken = [target / f.name for f in files if (target / f.name).exists() or (target / f.name).is_symlink()]
    if taken:
        names = ", ".join(p.name for p in taken)
        raise InputError(
            f"--copy {target}: {names} already exist there; nothing copied (remove them or choose another folder)"
        )
    copied = []
    for source in files:
        destination = target / source.name
        try:
            # "xb": never overwrite, even a file that appeared since the check above
            with source.open("rb") as reader, destination.open("xb") as writer:
                writer.write(reader.read())
        except FileExistsError:
            raise InputError(f"--copy {target}: {destination.name} appeared while copying; not overwritten") from None
        except OSError as exc:
            raise InputError(f"--copy {target}: cannot write {destination.name} ({exc.strerror or exc})") from None
        copied.append(destination)
    return copied


def main(args: argparse.Namespace) -> int:
    """List the examples (absolute path and description per line), or copy them with --copy."""
    files = example_files()
    if args.copy is not None:
        for path in copy_examples(files, args.copy):
            print(path.resolve())
        return 0
    width = max((len(str(p.resolve())) for p in files), default=0)
    for path in files:
        print(f"{path.resolve()!s:<{width}}  {describe(path)}")
    return 0
