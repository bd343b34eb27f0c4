"""Proposed edits: what the agent wants to change, until the person says yes."""
