"""Test only: put on a server's PYTHONPATH, it holds `import openai` until a file exists.

With $TALOS_TEST_OPENAI_GATE set to a path, the import of `openai` first writes
`<path>.importing` (the name of the thread importing it), then waits until `<path>` exists, then
imports the real package. A test sees when the import began and where, and holds it as long
as it likes: the product's code paths are the same as without it."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
import time

GATE = os.environ.get("TALOS_TEST_OPENAI_GATE")


class _Gate(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "openai":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            with open(f"{GATE}.importing", "w") as fh:
                fh.write(threading.current_thread().name)
            while not os.path.exists(GATE):
                time.sleep(0.01)
            real(module)

        spec.loader.exec_module = exec_module
        return spec


if GATE:
    sys.meta_path.insert(0, _Gate())
