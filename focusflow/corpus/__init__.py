"""Target-language text: sources, cleaning, deduplication, held-out splits (no Prefect here)."""
