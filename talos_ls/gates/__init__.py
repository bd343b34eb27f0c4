"""What stands between the agent and the person: the rationed question channel."""
