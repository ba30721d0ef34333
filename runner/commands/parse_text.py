"""``hofcat parse-text``: parse one reply from a file or stdin and print the answers as JSON (for debugging)."""

from __future__ import annotations

import argparse
import json
import sys

from runner.survey.vocab import MODES, QUESTIONS

NAME = "parse-text"
HELP = "Parse one model reply (a file or - for stdin) and print each question's option ID and status as JSON."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--mode, --question, --language, --options-order, --reply-format and the reply file."""
    parser.add_argument(
        "--mode",
        choices=MODES,
        required=True,
        help="item: one question per reply; survey: all 24 questions in one reply",
    )
    parser.add_argument("--question", type=int, metavar="N", help="the question asked (1-24); item mode only")
    parser.add_argument("--language", default="en", help="instrument language of the prompt (default: en)")
    parser.add_argument(
        "--options-order",
        default="1,2,3,4,5",
        metavar="IDS",
        help="option IDs in displayed order, e.g. 3,1,5,2,4 (default: 1,2,3,4,5)",
    )
    parser.add_argument(
        "--reply-format",
        default="number",
        help="the reply format the prompt asked for: number, json, free, fewshot (default: number)",
    )
    parser.add_argument("file", metavar="FILE", help="file holding the reply text, or - for stdin")


def main(args: argparse.Namespace) -> int:
    """Print one JSON object: parser version, the cell's design and one answer per question."""
    from runner.parse import parse_reply
    from runner.survey.cell import PromptCell
    from runner.survey.instrument import languages

    def fail(message: str) -> int:
        print(f"hofcat parse-text: error: {message}", file=sys.stderr)
        return 2

    if args.language not in languages():
        return fail(f"--language {args.language!r} is not an instrument language ({', '.join(languages())})")
    try:
        order = tuple(int(part) for part in args.options_order.split(","))
    except ValueError:
        return fail(f"--options-order {args.options_order!r}: expected comma-separated option IDs, e.g. 3,1,5,2,4")
    if sorted(order) != [1, 2, 3, 4, 5]:
        return fail(f"--options-order {args.options_order!r} is not a permutation of 1,2,3,4,5")
    if args.mode == "item":
        if args.question is None or not 1 <= args.question <= 24:
            return fail("item mode needs --question N with N in 1-24")
        questions: tuple[int, ...] = (args.question,)
    else:
        if args.question is not None:
            return fail("--question is for item mode; survey mode parses all 24 questions")
        questions = QUESTIONS
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        return fail(f"cannot read {args.file}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        return fail(f"{args.file} is not UTF-8 text (byte {exc.start})")
    cell = PromptCell(args.language, args.mode, questions, option_order=order, reply_format=args.reply_format)
    result = parse_reply(text, cell)
    print(
        json.dumps(
            {
                "parser_version": result.parser_version,
                "mode": args.mode,
                "language": args.language,
                "options_order": list(order),
                "answers": [answer.to_dict() for answer in result.answers],
            },
            ensure_ascii=False,
            indent=2,
        )
    )
    return 0
