"""Spec → plan → execute: expand a sweep spec into cells and send them under limits and retries.

``session.run_sweep`` drives one session: it opens the run directory (``runner.rundir``), runs the
executor over the unstored cells, and has the parse stage read every new responses part.
"""
