"""`talos demo`: a complete, clearly scripted session that needs no API key and no network."""
