"""The run directory: the one module that knows its layout, schemas, lock, parts and manifest.

Every stage reads and writes a run directory through here: ``writer`` (lock, atomic parts, manifest),
``reader`` (manifest, datasets, part pairs), ``schema`` (one row type per dataset, Arrow schemas derived).
"""

from runner.rundir.layout import DATASETS, FORMAT, RunDir
from runner.rundir.reader import (
    PartPair,
    answers_parser_version,
    column,
    part_pairs,
    read_dataset,
    read_manifest,
    read_output_json,
    read_output_table,
    stored_keys,
)
from runner.rundir.schema import (
    ANSWER_SCHEMA,
    PROMPT_SCHEMA,
    RESPONSE_SCHEMA,
    AnswerRow,
    PromptRow,
    ResponseRow,
    schema_of,
    table,
)
from runner.rundir.writer import RunWriter, versions

__all__ = [
    "ANSWER_SCHEMA",
    "DATASETS",
    "FORMAT",
    "PROMPT_SCHEMA",
    "RESPONSE_SCHEMA",
    "AnswerRow",
    "PartPair",
    "PromptRow",
    "ResponseRow",
    "RunDir",
    "RunWriter",
    "answers_parser_version",
    "column",
    "part_pairs",
    "read_dataset",
    "read_manifest",
    "read_output_json",
    "read_output_table",
    "schema_of",
    "stored_keys",
    "table",
    "versions",
]
