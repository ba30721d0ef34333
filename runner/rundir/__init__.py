"""The run directory: the one module that knows its layout, schemas, lock, parts and manifest.

Every stage reads and writes a run directory through here: ``writer`` (lock, atomic parts, manifest),
``reader`` (manifest, datasets, part pairs), ``schema`` (one row type per dataset, Arrow schemas derived).
"""

from runner.rundir.layout import DATASETS, FORMAT, RunDir
from runner.rundir.reader import (
    PartPair,
    answers_parser_version,
    column,
    part_columns,
    part_pairs,
    part_schema,
    read_dataset,
    read_manifest,
    read_output_json,
    read_output_table,
    read_part,
    stored_key_columns,
    stored_keys,
    unique_cells,
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
from runner.rundir.writer import Batch, Committed, RunWriter, store_error, versions

__all__ = [
    "ANSWER_SCHEMA",
    "DATASETS",
    "FORMAT",
    "PROMPT_SCHEMA",
    "RESPONSE_SCHEMA",
    "AnswerRow",
    "Batch",
    "Committed",
    "PartPair",
    "PromptRow",
    "ResponseRow",
    "RunDir",
    "RunWriter",
    "answers_parser_version",
    "column",
    "part_columns",
    "part_pairs",
    "part_schema",
    "read_dataset",
    "read_manifest",
    "read_output_json",
    "read_output_table",
    "read_part",
    "schema_of",
    "store_error",
    "stored_key_columns",
    "stored_keys",
    "table",
    "unique_cells",
    "versions",
]
