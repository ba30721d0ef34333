"""``hofcat plan SPEC``: what a sweep would send, counted, without sending anything."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from runner.commands._args import bounded_int

if TYPE_CHECKING:
    from runner.sweep.plan import PlannedCell
    from runner.sweep.spec import Spec

NAME = "plan"
HELP = "Count a spec's cells per factor, estimate tokens, cost and duration; show prompts; sends nothing."


# Requests shown for reading: they are built and held before printing, so a K past this would make memory grow
# with the plan; every request of a plan is what `hofcat run` sends and `hofcat export` lists afterwards.
SHOW_PROMPTS_MAX = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SPEC, --json and --show-prompts K."""
    parser.add_argument("spec", metavar="SPEC", help="the sweep spec (TOML)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--show-prompts",
        metavar="K",
        type=bounded_int(1, SHOW_PROMPTS_MAX),
        default=0,
        help=f"also print the first K (at most {SHOW_PROMPTS_MAX:,}) requests of the plan (dealt round-robin by "
        "endpoint, as `run --limit K` sends them) exactly as they will be sent: URL, headers and body, without "
        "credentials",
    )


def main(args: argparse.Namespace) -> int:
    """Print the plan summary (and K requests); exit 2 on a bad spec."""
    import json

    from runner.sweep.accounting import format_duration, plan_summary
    from runner.sweep.plan import distribution_repeats
    from runner.sweep.spec import load_spec

    spec = load_spec(args.spec)
    summary = plan_summary(spec)
    for endpoint in spec.endpoints:  # distribution cells that only repeat a request (temperature × top_p)
        cells, repeats = distribution_repeats(spec, endpoint)
        summary["endpoints"][endpoint.name]["distribution_repeats"] = {"cells": cells, "repeats": repeats}
    shown = shown_requests(spec, args.show_prompts) if args.show_prompts else []
    if args.json:
        print(json.dumps({**summary, "prompts": shown} if args.show_prompts else summary, indent=2))
        return 0
    print(f"run {summary['run']} (spec {summary['spec_hash']}): {summary['cells']} cells")
    print("  " + " × ".join(f"{n} {name}" for name, n in summary["factors"].items()))
    for name, e in summary["endpoints"].items():
        price = "" if e["cost_max"] is None else f", cost at most {e['cost_max']:.4f} ({e['execution']})"
        own = "" if e["design"] == "design" else f" (its own design: {e['design']})"
        print(
            f"  {name}{own}: {e['cells']} cells, input tokens at most {e['input_tokens_max']} (bound: UTF-8 bytes + "
            f"chat template; ~{e['input_tokens_estimate']} expected), output tokens at most {e['output_tokens_max']} "
            f"(bound: max_tokens){price}; at least {format_duration(e['eta_s'])} at {e['eta_basis']}"
        )
        rates = e["price_per_million"]
        if rates["online"]["input"] is not None or rates["online"]["output"] is not None:
            print(
                "    price per million tokens (input / output): "
                + "; ".join(
                    f"{x} {_rate(rates[x]['input'])} / {_rate(rates[x]['output'])}" for x in ("online", "batch")
                )
            )
        repeated = e["distribution_repeats"]
        if repeated["repeats"]:
            print(
                f"    {repeated['repeats']} of its {repeated['cells']} distribution cells repeat another cell's "
                "request: the first token's log-probabilities do not depend on temperature or top_p, so each "
                "temperature × top_p group asks the same thing; one temperature and top_p would send "
                f"{repeated['cells'] - repeated['repeats']} instead"
            )
    for name, how in summary.get("measurement_fallback", {}).items():
        print(f"  {name}: measurement distribution falls back to {how}")
    if summary["cost_max"] is not None:
        print(f"  total cost at most {summary['cost_max']:.4f}")
    for i, request in enumerate(shown, start=1):
        print()
        print(f"── request {i} of {len(shown)}: endpoint {request['endpoint']!r}, cell {request['cell_key']}")
        print(f"   {request['cell']}")
        print(f"POST {request['url']}")
        for header, value in request["headers"].items():
            print(f"{header}: {value}")
        if request["credentials"]:
            print(f"({request['credentials']})")
        print()
        print(request["body"])
    return 0


def shown_requests(spec: Spec, k: int) -> list[dict[str, Any]]:
    """The first ``k`` requests of the plan (``select(spec, limit=k)``, in round-robin order by endpoint) as
    they go on the wire: URL, headers and the exact body text. Built with no API key, so no credential is in
    them; ``credentials`` says which variable's key the real request adds."""
    import itertools
    import json

    from runner.sweep.plan import select
    from runner.sweep.providers import conventional_key_env, provider_for
    from runner.sweep.request import request_for

    selection = select(spec, limit=k)
    per_endpoint = [list(selection.iter_cells(spec, e)) for e in selection.endpoints]
    cells = [c for deal in itertools.zip_longest(*per_endpoint) for c in deal if c is not None]
    out = []
    for cell in cells:
        endpoint = cell.endpoint
        call = provider_for(endpoint).call(endpoint.base_url, None, request_for(cell))
        body = call.data if call.data is not None else json.dumps(call.body).encode()  # as the transport sends it
        variable = endpoint.api_key_env or conventional_key_env(endpoint)
        out.append(
            {
                "endpoint": endpoint.name,
                "cell_key": cell.key,
                "cell": describe(cell),
                "url": call.url,
                "headers": call.headers,
                "credentials": f"+ the {endpoint.provider} credential header, its key from ${variable}, not shown"
                if variable
                else "",
                "body": body.decode("utf-8"),
            }
        )
    return out


def describe(cell: PlannedCell) -> str:
    """A cell's design factors in one line: mode, language, framing, questions, format, order, sampling."""
    p, s, f = cell.prompt, cell.sampling, cell.prompt.framing
    framing = f.kind if f.kind == "none" else f"{f.kind} {f.country}" + (f", {f.gender} {f.age}" if f.age else "")
    questions = f"question {p.questions[0]}" if len(p.questions) == 1 else f"{len(p.questions)} questions"
    parts = [p.mode, p.language, framing, questions, f"reply_format {p.reply_format}"]
    parts.append(f"options {''.join(map(str, p.option_order))}")
    parts.append(f"seed {s.seed}, temperature {s.temperature}, top_p {s.top_p}, max_tokens {s.max_tokens}")
    if s.constraint != "none":
        parts.append(f"constraint {s.constraint}")
    if s.measurement != "sample":
        parts.append(f"measurement {s.measurement}" + (f" draw {s.draw}" if s.draw is not None else ""))
    return "; ".join(parts)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
