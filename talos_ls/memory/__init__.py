"""What the agent holds: facts with confidence, evidence counts and validity intervals."""
