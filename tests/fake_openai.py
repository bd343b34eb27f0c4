"""The scripted OpenAI-compatible server lives in the package (the demo uses it too)."""

from talos_ls.demo.scripted_model import ScriptedModelServer as FakeOpenAI
from talos_ls.demo.scripted_model import error, hang, reply, too_long

__all__ = ["FakeOpenAI", "error", "hang", "reply", "too_long"]
