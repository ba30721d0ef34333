"""Endpoints hofcat brings along: the simulator (known truth, faults), llama.cpp's local server, the demo."""
