# tests/notebook/plain_shell.py — child of test_notebook.py: the notebook's cells in an IPython shell without the recorder.
"""Runs the code cells of the notebook argv[1] in one in-process IPython shell (no kernel, no
LD_PRELOAD; PyTorch is the stand-in, its memory from the simulated runtime), as a kernel started
without the recorder would run them. Prints what the cells display, then per cell "error NAME" for an
exception it raised, and last "snapshot-verdict V" for each OOM of a PyTorch snapshot taken at the
end as gpumem-report reads it (what the magic must have shown)."""
import json
import pickle
import sys
import tempfile

from IPython.core.interactiveshell import InteractiveShell

with open(sys.argv[1], encoding="utf-8") as f:
    cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
shell = InteractiveShell.instance()
for cell in cells:
    result = shell.run_cell("".join(cell["source"]), store_history=True)
    sys.stdout.flush()
    if result.error_in_exec is not None:
        print("error", type(result.error_in_exec).__name__, flush=True)

import gpumemtrace  # noqa: E402
import torch  # noqa: E402
with tempfile.NamedTemporaryFile(suffix=".pickle") as f:
    pickle.dump(torch.cuda.memory._snapshot(), f)
    f.flush()
    for oom in gpumemtrace.read(f.name).ooms:
        print("snapshot-verdict", oom.verdict)
