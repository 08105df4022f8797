"""Where records go: the console table, the run's JSONL file, and MLflow."""
