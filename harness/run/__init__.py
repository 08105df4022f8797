"""The run: the plan of cases, the workers that run them, their processes, the progress and SIGINT."""
