"""``hofcat info``: versions, the live stats backend, where data is read from and which optional parts exist."""

from __future__ import annotations

import argparse
import json

NAME = "info"
HELP = (
    "Print hofcat's version, the live stats_core backend, the data directory and whether the optional "
    "local model parts (llama.cpp's server, SmolLM2) are installed."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def main(args: argparse.Namespace) -> int:
    """Print one JSON object describing this installation."""
    import stats_core
    from runner import __version__
    from runner.endpoints.llm import KNOWN_MODELS, SERVER_INSTALL, installed_model, server_version
    from runner.errors import LLMError
    from runner.survey.paths import DATA_DIR, EXAMPLES_DIR

    models: dict[str, str] = {}
    for name in KNOWN_MODELS:
        try:
            models[name] = str(installed_model(name))
        except LLMError as exc:  # not installed: the message names the install command
            models[name] = str(exc)
    version = server_version()
    print(
        json.dumps(
            {
                "hofcat": __version__,
                "stats_backend": stats_core.backend(),
                "stats_backends_available": list(stats_core.available()),
                "data_dir": str(DATA_DIR),
                "examples_dir": str(EXAMPLES_DIR),
                "llm_server": f"xllamacpp {version}" if version else f"not installed: {SERVER_INSTALL}",
                "llm_models": models,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return 0
