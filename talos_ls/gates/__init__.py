"""What stands between the agent and the person: the rationed question channel (what the agent
may ask: `question_queue`, its producers, `question_types`, `question_value`) and the permission
gate (what it may do without asking: `permissions`, which reads commands with the shell reader,
`shell` and its option tables `options`)."""
