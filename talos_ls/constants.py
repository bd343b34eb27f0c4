"""Values the command line offers and names in its `--help`, defined here, in a leaf that
imports nothing, so that `talos --version`, `--help` and `talos completion` load argparse and
little else (issue 30). Each is re-exported by the module it belongs to, where the rest of
Talos reads it.
"""

MODES = ("read-only", "ask", "auto-edit", "full-auto")  # gates/permissions.py: least to most
SOURCES = ("person", "rules file", "workspace scan", "model")  # memory/facts.py: of a fact
QUESTION_BUDGET_TURNS = 5  # gates/question_queue.py: at most one question per K turns
RANKINGS = ("seed", "value")  # gates/question_value.py: which open question goes first
ENV_URL = "TALOS_STORE_URL"  # store/: the store's URL, when --store is not given
SHELLS = ("bash", "zsh", "fish")  # completion.py: the shells it writes a script for
