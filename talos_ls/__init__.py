"""Talos: a coding agent in a language server, with a strictly rationed question channel."""

__version__ = "0.1.0"
