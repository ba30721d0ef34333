"""The shared vocabulary of every stage: cells, the instrument, prompts, dimensions, reference sets, data files.

Nothing here imports another stage; every stage imports from here.
"""
